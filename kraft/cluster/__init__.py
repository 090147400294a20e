"""A kraft cluster of real processes on this machine, for tests, demos and `kraft cluster up`.

- `kraft.cluster.local`: `LocalCluster`, controllers and brokers as child processes on
  loopback (start, stop, kill, pause, topics);
- `kraft.cluster.process`: `ManagedProcess`, one child that never outlives its parent, and
  free ports;
- `kraft.cluster.health`: the one check of what "healthy" means, shared by
  `LocalCluster.wait_until_healthy` and ``kraft cluster status``.

::

    from kraft.cluster import LocalCluster   # or: from kraft import LocalCluster
"""

from kraft.cluster.health import ClusterHealth, NodeExitedError
from kraft.cluster.local import LocalCluster

__all__ = ["ClusterHealth", "LocalCluster", "NodeExitedError"]
