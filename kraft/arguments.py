"""What every kraft command line shares: argparse types for counts and seeds, and a parser
whose errors are one line.

The `kraft` CLI, the simulators' parsers (``kraft sim``) and the benchmarks' own parsers
(``kraft bench ...``) all use these, so a bad count reads the same everywhere::

    p = ArgumentParser(prog="kraft bench raft")
    p.add_argument("--entries", type=positive_int, default=200_000)
    p.add_argument("--failover-runs", type=non_negative_int, default=10)
    p.add_argument("--start", type=seed, default=0)        # hex or decimal, >= 0

    $ kraft bench raft --entries -1
    kraft: error: argument --entries: expected an integer >= 1, got '-1' (see: kraft bench ...

This module imports only the standard library: ``kraft --help`` stays fast.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import NoReturn

_QUOTE_MAX = 40
"""Errors quote at most this many characters of what the user typed."""


def quote(text: str) -> str:
    """``repr(text)``, cut to a bounded length (errors never echo unbounded input)."""
    return repr(text if len(text) <= _QUOTE_MAX else text[:_QUOTE_MAX] + "...")


def int_at_least(minimum: int, *, base: int = 10) -> Callable[[str], int]:
    """An argparse ``type``: an integer (in ``base``; 0 also takes ``0x..``) >= ``minimum``.

    The one check behind `positive_int`, `non_negative_int` and `seed`.
    """

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), base)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {quote(text)}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {quote(text)}")
        return value

    return parse


positive_int = int_at_least(1)
"""A count that must be at least 1: ``--seeds``, ``--partitions``, ``--records``, ..."""

non_negative_int = int_at_least(0)
"""A count where 0 means "none": ``--observers``, ``--failover-runs``, ..."""

seed_int = int_at_least(0, base=0)
"""A simulator seed or first seed: decimal or ``0x`` hex, never negative."""


def seconds_at_least(minimum: float, *, exclusive: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number of seconds >= ``minimum`` (> with ``exclusive``);
    ``nan`` and ``inf`` are refused, since a deadline of either never comes."""
    bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected seconds, got {quote(text)}") from None
        if not math.isfinite(value) or value < minimum or (exclusive and value == minimum):
            raise argparse.ArgumentTypeError(f"expected seconds {bound}, got {quote(text)}")
        return value

    return parse


positive_seconds = seconds_at_least(0, exclusive=True)
"""A deadline: ``--timeout`` of the client commands."""

non_negative_seconds = seconds_at_least(0)
"""A wait where 0 means "do not wait": ``kraft consume --timeout``."""


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose errors are one line on stderr (exit code 2), in the
    form every other kraft error takes: ``kraft: error: MESSAGE (see: PROG --help)``.

    Subparsers made with ``add_subparsers`` inherit the class.
    """

    def error(self, message: str) -> NoReturn:
        one_line = " ".join(message.split())
        self.exit(2, f"kraft: error: {one_line} (see: {self.prog} --help)\n")


__all__ = [
    "ArgumentParser",
    "int_at_least",
    "non_negative_int",
    "non_negative_seconds",
    "positive_int",
    "positive_seconds",
    "quote",
    "seconds_at_least",
    "seed_int",
]
