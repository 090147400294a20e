"""The main job's report: what it measured (`Summary`) and the summary it prints."""

from __future__ import annotations

from dataclasses import dataclass, field


class DemoError(Exception):
    """A step did not complete (the message says which and where the logs are)."""


@dataclass
class Summary:
    """What the demo measured; printed at the end and written by ``--summary-json``."""

    records: int
    acknowledged: int = 0
    failed: int = 0
    consumed: int = 0
    lost: int = 0
    duplicates: int = 0
    misplaced: int = 0
    unacknowledged_present: int = 0
    foreign: int = 0
    produce_s: float = 0.0
    produce_records_per_s: float = 0.0
    consume_s: float = 0.0
    consume_records_per_s: float = 0.0
    killed_broker: int | None = None
    killed_leader_of: int = 0
    fenced_after_s: float | None = None
    failover_s: float | None = None
    isr_shrunk_after_s: float | None = None
    producer_retries: int = 0
    rejoined_after_restart_s: float | None = None
    group_processed: int = 0
    group_missed: int = 0
    group_duplicates: int = 0
    group_killed_partitions: list[int] = field(default_factory=list)
    group_rebalance_s: float | None = None
    group_session_timeout_ms: int = 0
    group_s: float = 0.0
    acls_granted: list[str] = field(default_factory=list)
    """``--authorizer``: the ACLs granted to the demo's clients (`kraft.demo.acl_step`)."""
    spark: str = "not run"
    spark_rows: int | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    total_s: float = 0.0
    load_average: list[float] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.errors
            and self.lost == 0
            and self.duplicates == 0
            and self.misplaced == 0
            and self.failed == 0
            and self.group_missed == 0
        )


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def render_summary(summary: Summary) -> str:
    phases = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in summary.phases_s.items())
    load = ", ".join(f"{x:.2f}" for x in summary.load_average)
    lines = [
        "",
        "summary",
        f"  records            {summary.records:,} produced with acks=all and idempotence; "
        f"{summary.acknowledged:,} acknowledged, {summary.failed} failed",
        f"  produce            {summary.produce_records_per_s:,.0f} records/s "
        f"({summary.produce_s:.1f}s, failover included)",
        f"  consume            {summary.consume_records_per_s:,.0f} records/s "
        f"({summary.consumed:,} records in {summary.consume_s:.1f}s)",
        f"  failover           broker {summary.killed_broker} (leader of "
        f"{summary.killed_leader_of} partitions) killed; fenced after "
        f"{_s(summary.fenced_after_s)}, new leaders after {_s(summary.failover_s)}, "
        f"out of every ISR after {_s(summary.isr_shrunk_after_s)}; "
        f"{summary.producer_retries} producer batch retries",
        f"  recovery           back in every ISR {_s(summary.rejoined_after_restart_s)} "
        f"after its restart",
        f"  consumer group     3 consumers, one killed (owner of partitions "
        f"{summary.group_killed_partitions}); rebalanced {_s(summary.group_rebalance_s)} after "
        f"the kill (session timeout {summary.group_session_timeout_ms / 1000:.1f}s); "
        f"{summary.group_processed:,} records processed, {summary.group_missed} acknowledged "
        f"ones missed, {summary.group_duplicates:,} processed twice (at-least-once)",
        f"  spark              {summary.spark}",
        *(
            [
                f"  acls               the clients (User:CN=client, no super user) were granted "
                f"{len(summary.acls_granted)} ACLs, and nothing was refused"
            ]
            if summary.acls_granted
            else []
        ),
        f"  lost = {summary.lost}",
        f"  duplicates = {summary.duplicates}",
        f"  misplaced = {summary.misplaced}",
        f"  time               {summary.total_s:.1f}s in all: {phases}",
        f"  load average       {load} (before the demo)",
    ]
    if summary.errors:
        lines += [f"  FAILED: {error}" for error in summary.errors]
    else:
        lines.append(
            "  OK: every acknowledged record was read back exactly once"
            if summary.ok
            else "  FAILED: see above"
        )
    return "\n".join(lines)


__all__ = ["DemoError", "Summary", "render_summary"]
