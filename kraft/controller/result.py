"""`ControllerResult`: the records a decision produced and the response to send after commit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from kraft.metadata.records import MetadataRecord

R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerResult(Generic[R_co]):
    """What a controller decision produced.

    Contract (the shell's side):

    - ``records`` are appended to the metadata log as **one atomic batch** (all or none), in
      this order; they may be empty (a rejected or read-only request).
    - ``response`` is released to the caller only **after** the batch commits (its high
      watermark passes the batch's last offset). If the batch is lost (leadership lost before
      commit) the shell answers NOT_CONTROLLER instead and the caller retries.
    """

    records: tuple[MetadataRecord, ...]
    response: R_co


__all__ = ["ControllerResult"]
