"""``kraft nemesis --network netns``: the nemesis on a cluster of network hosts (issue 29),
its packet faults (loss, a delay by netem or the relay) beside the others, the history
checked as on loopback.

Needs root (CI has it); where namespaces cannot be made it fails with one line, it does not
skip.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraft.cli import main
from replication.nemesis.faults import parse_fault_kinds
from tests.netns import require_namespaces

pytestmark = pytest.mark.timeout(120)


def test_packet_faults_are_offered_only_on_a_network_of_hosts() -> None:
    for kind in ("loss", "reorder", "duplicate"):
        assert kind in parse_fault_kinds("all", packets=True)
        assert kind not in parse_fault_kinds("all")
        with pytest.raises(ValueError, match="--network netns"):
            parse_fault_kinds(f"kill,{kind}")


def test_network_faults_are_the_kinds_that_leave_every_process_running() -> None:
    """``--faults network`` (a soak whose memory slopes cover processes that lived the whole
    run): no kill, pause, stop or restart; loss only where packets can be dropped."""
    assert parse_fault_kinds("network", packets=True) == (
        "partition",
        "delay",
        "bandwidth",
        "loss",
        "reorder",
        "duplicate",
    )
    assert parse_fault_kinds("network") == ("partition", "delay", "bandwidth")


def test_a_nemesis_run_on_network_hosts_loses_nothing_under_loss_and_delay(
    tmp_path: Path,
) -> None:
    """Seed 7 draws 1% loss on a broker's link, then a 100 ms (± 20 ms) delay on a
    controller's: both applied (the delay says whether netem or the relay ran), every
    acknowledged record read back, the replicas identical."""
    require_namespaces()
    out = tmp_path / "nemesis"
    code = main(
        [
            "nemesis", "--network", "netns", "--seed", "7", "--duration", "22",
            "--faults", "partition,loss,delay,bandwidth,kill,pause",
            "--producers", "2", "--readers", "1", "--rate", "100", "--out", str(out), "--json",
        ]
    )  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    faults = {f["kind"]: f for f in summary["faults"]}
    assert set(faults) == {"loss", "delay"}, summary["faults"]
    assert not any(f["error"] for f in summary["faults"]), summary["faults"]
    assert faults["delay"]["nodes"][-1] in ("by:netem", "by:relay")
    history = summary["history"]
    assert history["acknowledged"] > 0 and summary["replicas_identical"], history
    assert code == 0 and summary["valid"], summary
