"""The acknowledged-data checker of ``kraft compare``: what was acknowledged against what a
final read of the topic returned.

Pure: it takes the values whose send was acknowledged and the values read back (every value
carries a unique sequence, so a value names its send) and returns a `LossCheck`. A value
acknowledged and never read is *lost*; a value read more than once is a *duplicate* (a retry
without idempotence may write one twice, as a Kafka retry after a timeout may); a value read
but never acknowledged is harmless (its acknowledgement was lost or it timed out after the
write), and counted apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

EXAMPLES = 5
"""How many lost values a check quotes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LossCheck:
    acknowledged: int
    read: int
    lost: int
    duplicates: int
    unacknowledged_present: int
    lost_examples: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """No acknowledged value is missing (duplicates are reported, not a loss)."""
        return self.lost == 0

    def as_dict(self) -> dict[str, object]:
        return {
            "acknowledged": self.acknowledged,
            "read": self.read,
            "lost": self.lost,
            "duplicates": self.duplicates,
            "unacknowledged_present": self.unacknowledged_present,
            "lost_examples": list(self.lost_examples),
        }


def check_acknowledged(acknowledged: Iterable[bytes], read: Iterable[bytes]) -> LossCheck:
    """Compare the acknowledged values with the values a final read returned."""
    acked = list(dict.fromkeys(acknowledged))
    counts = Counter(read)
    acked_set = set(acked)
    lost = [v for v in acked if v not in counts]
    return LossCheck(
        acknowledged=len(acked),
        read=sum(counts.values()),
        lost=len(lost),
        duplicates=sum(n - 1 for n in counts.values() if n > 1),
        unacknowledged_present=sum(1 for v in counts if v not in acked_set),
        lost_examples=tuple(v[:40].decode("utf-8", "replace") for v in lost[:EXAMPLES]),
    )


__all__ = ["LossCheck", "check_acknowledged"]
