"""A kraft cluster of real processes on this machine, for tests, demos and `kraft cluster up`.

- `kraft.cluster.local`: `LocalCluster`, controllers and brokers as child processes on
  loopback (start, stop, kill, pause, topics);
- `kraft.cluster.process`: `ManagedProcess`, one child that never outlives its parent, and
  free ports;
- `kraft.cluster.health`: the one check of what "healthy" means, shared by
  `LocalCluster.wait_until_healthy` and ``kraft cluster status``.

::

    from kraft.cluster import LocalCluster   # or: from kraft import LocalCluster

The names below are imported on first use, so that a module of the package (the CLI takes
`kraft.cluster.process` before it parses its arguments) costs only itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kraft.cluster.health import ClusterHealth, NodeExitedError
    from kraft.cluster.local import LocalCluster

_EXPORTS = {
    "ClusterHealth": "kraft.cluster.health",
    "NodeExitedError": "kraft.cluster.health",
    "LocalCluster": "kraft.cluster.local",
}

__all__ = ["ClusterHealth", "LocalCluster", "NodeExitedError"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kraft.cluster' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
