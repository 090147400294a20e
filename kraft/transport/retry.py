"""The one retry loop of kraft's clients: retry retriable errors until a deadline.

``tenacity`` does the waiting; this module fixes the policy every client shares (only
``KraftError``s whose class is ``retriable``, never past the deadline) and the error the
caller sees when time runs out: the last one, of the same type and code, saying how many
attempts were made in how long.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)

from storage.errors import KraftError, NotControllerError, error_for

R = TypeVar("R")

Wait = Callable[[RetryCallState], float]


class StopRetrying(Exception):
    """Raised by an attempt to end the loop at once with ``error``, retriable or not (a
    definite answer such as every bootstrap address refusing connections)."""

    def __init__(self, error: KraftError) -> None:
        super().__init__(error.message)
        self.error = error


def retry_retriable(attempt: Callable[[], R], *, timeout_s: float, wait: Wait | None = None) -> R:
    """Call ``attempt`` until it returns, retrying retriable `KraftError`s with ``wait``
    (default: exponential backoff with jitter, 50 ms doubling up to 1 s) until ``timeout_s``.

    Raises:
        KraftError: a non-retriable error at once; the last retriable one, its message
            extended with "gave up after N attempts in X s", once the deadline passed; the
            error of a `StopRetrying` an attempt raised, as it is.
    """
    started = time.monotonic()
    attempts = 0

    def counted() -> R:
        nonlocal attempts
        attempts += 1
        return attempt()

    retrying = Retrying(
        stop=stop_after_delay(timeout_s),
        wait=wait or wait_exponential_jitter(multiplier=0.05, max=1.0, jitter=0.05),
        retry=retry_if_exception(lambda e: isinstance(e, KraftError) and e.retriable),
        reraise=True,
    )
    try:
        return retrying(counted)
    except StopRetrying as stop:
        raise stop.error from None
    except KraftError as e:
        if not e.retriable:
            raise
        elapsed = time.monotonic() - started
        message = f"{e.message} (gave up after {attempts} attempts in {elapsed:.1f}s)"
        if isinstance(e, NotControllerError):  # keep the redirect hint
            raise NotControllerError(
                message, leader_id=e.leader_id, leader_address=e.leader_address
            ) from None
        raise error_for(e.code, message) from None
    finally:
        # tenacity keeps the last round's actions, bound methods of ``retrying``, in
        # ``retrying``'s own state: a cycle only the collector frees. A broker calls this for
        # every heartbeat (2 a second), and a server collects its oldest generation rarely
        # (kraft.gc_tuning), so thousands of them piled up between collections.
        retrying.iter_state.reset()


__all__ = ["StopRetrying", "Wait", "retry_retriable"]
