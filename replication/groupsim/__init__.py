"""The consumer-group simulation: members against the pure group coordinator, under faults.

Members (`SimMember`) join, heartbeat, process and commit; they crash, pause, get isolated
and leave. The coordinator (`CoordinatorHost`) runs the pure `replication.group` core behind
a simulated offsets partition whose uncommitted tail may be lost when the coordinator's
broker crashes and a new leader reloads. `GroupChecker` checks exclusive ownership as the
members see it, monotonic committed offsets, rejection of fenced commits and at-least-once
delivery. A failing seed replays exactly::

    kraft sim group --seeds 300 --start 0
    kraft sim group --seed 0x2a
"""

from .checker import GroupChecker
from .host import CoordinatorHost, Link
from .member import SimMember
from .run import GroupSeedResult, GroupSummary, cli_group, replay_command, run_seed, run_seeds

__all__ = [
    "CoordinatorHost",
    "GroupChecker",
    "GroupSeedResult",
    "GroupSummary",
    "Link",
    "SimMember",
    "cli_group",
    "replay_command",
    "run_seed",
    "run_seeds",
]
