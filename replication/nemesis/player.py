"""`FaultPlayer`: applies one planned `Fault` to a running cluster and undoes it.

The targeted faults set up the window they are about (``faults.py`` says which): they wait
for the conditions they need and count acknowledged writes rather than sleep, so a loaded
machine makes them slower, never empty.
"""

from __future__ import annotations

import threading
import time
from typing import Final

from kraft.cluster.local import LocalCluster
from kraft.cluster.netns_cluster import NetnsCluster
from kraft.cluster.process import wait_for
from kraft.metadata.image import PartitionDescription
from replication.nemesis.faults import Fault
from replication.nemesis.history import Ack, History
from replication.nemesis.links import HostLinks, ProxyLinks

TOPIC: Final = "nemesis"
FAULT_SETUP_TIMEOUT_S: Final = 30.0
"""How long a targeted fault waits for each condition of its setup."""
LONE_LEADER_WINDOW_S: Final = 1.5
"""How long ``lone-leader`` acknowledges alone at most: half the nemesis's
``replica.lag.time.max.ms`` (3 s), so its followers stay in the ISR."""
LONE_LEADER_ATTEMPTS: Final = 3


def _in_sync(partition: PartitionDescription) -> bool:
    return set(partition.isr) >= set(partition.replicas)


class FaultPlayer:
    """Applies one `Fault` to the cluster and undoes it."""

    def __init__(
        self,
        cluster: LocalCluster | NetnsCluster,
        history: History,
        network: ProxyLinks | HostLinks,
        *,
        unclean: bool,
        topic: str = TOPIC,
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.history = history
        self.unclean = unclean
        self.network = network

    def _acks_of_partition_zero(self) -> int:
        return sum(
            1 for op in list(self.history.operations) if isinstance(op, Ack) and op.partition == 0
        )

    def _leader_of_partition_zero(self) -> int:
        """Raises RuntimeError: partition 0 has no leader now (a fault aimed at it fails)."""
        description = self.cluster.describe_topic(self.topic, timeout=5)
        leader: int = description.partitions[0].leader
        if leader < 0:
            raise RuntimeError(f"{self.topic}-0 has no leader")
        return leader

    def apply(self, fault: Fault) -> list[str]:
        """Start ``fault``; the nodes it hit."""
        c, net = self.cluster, self.network
        match fault.kind, fault.shape:
            case "kill", _:
                c.kill_broker(int(fault.targets[0]))
                return [str(fault.targets[0])]
            case "pause", _:
                c.pause_broker(int(fault.targets[0]))
                return [str(fault.targets[0])]
            case "stop", _:
                c.stop_broker(int(fault.targets[0]))
                return [str(fault.targets[0])]
            case "kill-controller", _:
                active = c.active_controller_id(timeout=5)
                c.kill_controller(active)
                return [f"controller-{active}"]
            case "roll", _:
                for broker in fault.targets:
                    c.stop_broker(int(broker))
                    c.start_broker(int(broker))
                    c.wait_until_healthy(timeout=60)
                return [str(b) for b in fault.targets]
            case "stale-leader", _:
                return self._stale_leader()
            case "lone-leader", _:
                return self._lone_leader()
            case "delay" | "bandwidth", _:
                node = self._target(fault)
                ran = net.slow(
                    node,
                    delay_ms=fault.delay_ms,
                    jitter_ms=fault.jitter_ms,
                    rate_bytes_per_s=fault.rate_bytes_per_s,
                )
                return [str(node), f"by:{ran}"]
            case "loss", _:
                node = self._target(fault)
                net.loss(node, fault.loss_percent)
                return [str(node)]
            case "reorder" | "duplicate", _:
                node = self._target(fault)
                ran = net.disorder(
                    node, reorder_ms=fault.delay_ms, duplicate_percent=fault.duplicate_percent
                )
                return [str(node), f"by:{ran}"]
            case "partition", "isolate":
                net.isolate(int(fault.targets[0]))
                return [str(fault.targets[0])]
            case "partition", "leader-from-controllers":
                leader = self._leader_of_partition_zero()
                net.partition({leader}, set(c.controller_ids))
                return [str(leader)]
            case "partition", "one-way":
                broker = int(fault.targets[0])
                net.one_way(broker)
                return [str(broker)]
            case "partition", _:  # majority, bridge
                net.partition(set(fault.side_a), set(fault.side_b))
                return [*map(str, fault.side_a), "|", *map(str, fault.side_b)]
        raise ValueError(f"unknown fault {fault.label}")

    def _target(self, fault: Fault) -> int:
        target = fault.targets[0]
        return self._leader_of_partition_zero() if target == "leader" else int(target)

    def _stale_leader(self) -> list[str]:
        """Isolate a follower of partition 0 until it leaves the ISR, let writes go on
        without it, kill every other replica, then reconnect it (see ``faults.py``)."""
        c, net = self.cluster, self.network
        partition = c.describe_topic(self.topic, timeout=5).partitions[0]
        stale = next(r for r in partition.replicas if r != partition.leader)
        net.isolate(stale)
        wait_for(
            lambda: stale not in c.describe_topic(self.topic, timeout=5).partitions[0].isr,
            FAULT_SETUP_TIMEOUT_S,
            f"broker {stale} to leave the ISR of {self.topic}-0",
            interval=0.2,
        )
        # Acknowledged writes the stale replica never gets (about 2 s of the default load):
        # counted, not slept on, since on a loaded machine 2 s could pass with none, and the
        # run then rightly reported nothing lost.
        acked = self._acks_of_partition_zero()
        wait_for(
            lambda: self._acks_of_partition_zero() >= acked + 100,
            FAULT_SETUP_TIMEOUT_S,
            f"100 writes to {self.topic}-0 acknowledged without broker {stale}",
            interval=0.2,
        )
        others = [r for r in partition.replicas if r != stale]
        for broker in others:
            c.kill_broker(broker)
        net.heal()
        if self.unclean:
            # The others restart when the fault ends: if that came before the controller fenced
            # them and elected the stale replica, the election would be clean after all.
            wait_for(
                lambda: c.describe_topic(self.topic, timeout=5).partitions[0].leader == stale,
                FAULT_SETUP_TIMEOUT_S,
                f"broker {stale} to be elected (uncleanly) leader of {self.topic}-0",
                interval=0.2,
            )
        return [str(stale), "killed:", *map(str, others)]

    def _lone_leader(self) -> list[str]:
        """Cut partition 0's leader from its in-sync followers, let it acknowledge acks=1
        writes alone for less than the ISR lag time, then kill it and reconnect the rest (see
        ``faults.py``). Tried again if the ISR shrank first: a leader alone in its ISR is not
        replaced when it dies, so it would lose nothing, and the run rightly report nothing."""
        c, net = self.cluster, self.network
        for _ in range(LONE_LEADER_ATTEMPTS):
            wait_for(
                lambda: _in_sync(c.describe_topic(self.topic, timeout=5).partitions[0]),
                FAULT_SETUP_TIMEOUT_S,
                f"every replica of {self.topic}-0 in its ISR",
                interval=0.2,
            )
            partition = c.describe_topic(self.topic, timeout=5).partitions[0]
            followers = {r for r in partition.replicas if r != partition.leader}
            acked = self._acks_of_partition_zero()
            net.partition({partition.leader}, followers)
            # counted, not slept on: on a loaded machine a fixed wait could see none
            deadline = time.monotonic() + LONE_LEADER_WINDOW_S
            while time.monotonic() < deadline and self._acks_of_partition_zero() < acked + 50:
                threading.Event().wait(0.05)
            now = c.describe_topic(self.topic, timeout=5).partitions[0]
            if self._acks_of_partition_zero() > acked and _in_sync(now):
                c.kill_broker(partition.leader)
                net.heal()
                return ["killed:", str(partition.leader)]
            net.heal()
        raise RuntimeError(
            f"{self.topic}-0's leader never acknowledged writes alone while its followers "
            f"stayed in the ISR ({LONE_LEADER_ATTEMPTS} tries)"
        )

    def undo(self, fault: Fault, nodes: list[str]) -> None:
        c, net = self.cluster, self.network
        match fault.kind:
            case "stale-leader" | "lone-leader":
                for broker in nodes[nodes.index("killed:") + 1 :]:
                    c.start_broker(int(broker))
            case "kill" | "stop":
                c.start_broker(int(fault.targets[0]))
            case "pause":
                c.resume_broker(int(fault.targets[0]))
            case "kill-controller":
                c.start_controller(int(nodes[0].removeprefix("controller-")))
            case "partition" | "loss":
                net.heal()  # a connection that lived through a blackhole starts afresh
            case "delay" | "bandwidth" | "reorder" | "duplicate":
                net.heal(reset=False)  # the bytes queued in the proxies drain at full speed
            case _:
                pass

    def heal_all(self) -> None:
        """Everything back: links healed, paused nodes resumed, dead nodes started."""
        self.network.heal()
        c = self.cluster
        for broker in c.broker_ids:
            process = c.broker(broker)
            if process.is_running():
                c.resume_broker(broker)
            else:
                c.start_broker(broker)
        for controller in c.controller_ids:
            process = c.controller(controller)
            if process.is_running():
                c.resume_controller(controller)
            else:
                c.start_controller(controller)
