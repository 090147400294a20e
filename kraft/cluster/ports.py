"""Listen ports for local clusters: free now, and not handed to anyone else for a while.

A port that is free when drawn is not yet listened on: a node binds it seconds later, once
its process has started. Two clusters started at the same time on one machine (pytest's
workers, two ``kraft cluster up``) could otherwise draw the same port, and the second node
to bind it exits with "the port is taken". So every port drawn is also leased, for
`LEASE_S`, in a small file shared by every process of this user (``flock``-guarded), and
a port under lease is never drawn again until the lease ends; by then its node listens on
it, and the bind check skips it.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import time
from pathlib import Path
from typing import IO, Final

EPHEMERAL_PORTS: Final = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_PORTS_FLOOR: Final = 15000
"""The lowest port `free_ports` draws."""
LEASE_S: Final = 600.0
"""How long a drawn port is kept from every other draw on this machine."""


def lease_file() -> Path:
    return Path(tempfile.gettempdir()) / f"kraft-port-leases-{os.getuid()}"


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that were free a moment ago (bound, then closed) and that
    no other `free_ports` call on this machine handed out in the last `LEASE_S` seconds.

    They are drawn below the kernel's ephemeral range (``ip_local_port_range``, from 32768 on
    Linux): a port from that range, which is what binding port 0 gives, can be taken by any
    process's outgoing connection while its node is down, and a killed broker then cannot
    listen again when it restarts. Where the range is unknown, the kernel picks (port 0).
    """
    try:
        low = int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    with open(lease_file(), "a+") as leases:
        fcntl.flock(leases, fcntl.LOCK_EX)  # released when the file closes
        now = time.time()
        leased = _read_leases(leases, now)
        ports = _draw(count, host, low, set(leased))
        leased.update({port: now + LEASE_S for port in ports})
        leases.seek(0)
        leases.truncate()
        leases.write("".join(f"{port} {until:.0f}\n" for port, until in leased.items()))
    return ports


def _read_leases(leases: IO[str], now: float) -> dict[int, float]:
    """The unexpired leases in the open lease file (a line per port: port, end of lease)."""
    leases.seek(0)
    current: dict[int, float] = {}
    for line in leases.read().splitlines():
        try:
            port, until = line.split()
            if float(until) > now:
                current[int(port)] = float(until)
        except ValueError:
            continue  # a line torn by a crash mid-write: that lease is simply gone
    return current


def _draw(count: int, host: str, low: int, leased: set[int]) -> list[int]:
    candidates = (
        random.sample(range(LISTEN_PORTS_FLOOR, low), low - LISTEN_PORTS_FLOOR)
        if (low > LISTEN_PORTS_FLOOR + 1000)
        else []
    )
    sockets: list[socket.socket] = []
    try:
        for port in candidates:
            if len(sockets) == count:
                break
            if port in leased:
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, port))
            except OSError:
                s.close()
                continue
            sockets.append(s)
        while len(sockets) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
