"""Benchmarks behind ``kraft bench ...``: each prints its figures beside a baseline measured in
the same run (raw file I/O, raw gRPC, a peer library), never against an absolute number alone.

- `kraft.bench.raft`: the 3-process embeddable Raft log vs PySyncObj (throughput, one-at-a-time
  latency, failover after SIGKILL of the leader).
"""


class BenchError(Exception):
    """A benchmark could not measure what it was asked to (its cluster, a client or a check
    failed); the command says so in one line."""
