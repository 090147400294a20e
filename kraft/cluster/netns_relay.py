"""Delay and jitter between network namespaces without netem: a delaying packet relay.

A kernel without the netem qdisc (``CONFIG_NET_SCH_NETEM`` unset) cannot hold packets back,
so a process does: a classic-BPF filter on the link redirects each IPv4 packet to a veth
pair whose far end this relay reads with a packet socket; the relay holds the packet for the
delay (and jitter: `kraft.cluster.delay_line`, the same delivery rule as the TCP fault
proxy's; with ``--reorder`` a packet may overtake another; with ``--duplicate-percent`` that
share of packets is sent twice, each copy on its own delay) and writes it back onto the link
it came from, marked (``SO_MARK``), so the filter
lets it pass the second time and every other fault of the link (drops, loss, a token
bucket) then applies to it as usual. Per direction of a host's link (`kraft.cluster.netns`):

- ``in`` (to the host): the filter is on the egress of the host's veth end on the bridge;
  the relay runs in this machine's namespace and writes onto that end;
- ``out`` (from the host): the filter is on the egress of the host's own interface, inside
  its namespace; the relay runs in that namespace (``ip netns exec``) and writes there.

It works below TCP, so the processes on either end see only a slower network: their
connections are end to end, as with netem. Packets pass through whole, GSO segments
included, with their checksum offload state (``PACKET_VNET_HDR`` on both sockets). The
relay's random source is ``random.Random(seed)``, made here in the shell; it exits on
SIGTERM, when its interface goes, or when the process that owns the network dies.

Run as ``python -m kraft.cluster.netns_relay --listen DEV --send DEV --delay-ms MS ...``;
`start_relay` does that and waits until it is ready.
"""

from __future__ import annotations

import argparse
import os
import random
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Final

from kraft.cluster.delay_line import DelayLine
from kraft.cluster.netns import RELAY_MARK

_ETH_P_ALL: Final = 0x0003
_ETH_P_IP: Final = b"\x08\x00"
_SOL_PACKET: Final = 263
_SO_SNDBUFFORCE: Final = 32
_SO_RCVBUFFORCE: Final = 33
_PACKET_VNET_HDR: Final = 15
_VNET_HDR_BYTES: Final = 10
_PACKET_OUTGOING: Final = 4
_MAX_FRAME: Final = 256 * 1024
READY: Final = "ready"


def _packet_socket(device: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
    sock.setsockopt(_SOL_PACKET, _PACKET_VNET_HDR, 1)
    sock.bind((device, 0))
    return sock


def relay(
    listen: str,
    send: str,
    delay_ms: float,
    jitter_ms: float,
    seed: int,
    owner_pid: int,
    *,
    reorder: bool = False,
    duplicate_percent: float = 0.0,
) -> None:
    """Relay every IPv4 frame that arrives on ``listen`` to ``send``, delayed (see the module
    docstring), until SIGTERM, an interface error, or ``owner_pid`` exits."""
    rx = _packet_socket(listen)
    rx.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, 16 * 1024 * 1024)
    rx.setblocking(False)
    tx = _packet_socket(send)
    tx.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, RELAY_MARK)
    tx.setsockopt(socket.SOL_SOCKET, _SO_SNDBUFFORCE, 16 * 1024 * 1024)
    rng = random.Random(seed)
    line: DelayLine[bytes] = DelayLine(delay_ms / 1000, jitter_ms / 1000, reorder=reorder)
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    print(READY, flush=True)
    checked = time.monotonic()
    while not stop:
        now = time.monotonic()
        due = line.next_due
        wait = 0.5 if due is None else min(0.5, max(0.0, due - now))
        try:
            readable, _, _ = select.select([rx], [], [], wait)
        except InterruptedError:
            continue
        now = time.monotonic()
        if readable:
            while True:
                try:
                    frame, address = rx.recvfrom(_MAX_FRAME)
                except BlockingIOError:
                    break
                # What the relay's own veth end sends (IPv6 neighbour discovery...) is not
                # traffic of the link: only IPv4 that arrived is.
                ether_type = frame[_VNET_HDR_BYTES + 12 : _VNET_HDR_BYTES + 14]
                if address[2] != _PACKET_OUTGOING and ether_type == _ETH_P_IP:
                    line.push(now, frame, rng.random())
                    if duplicate_percent and rng.random() * 100 < duplicate_percent:
                        line.push(now, frame, rng.random())
        for frame in line.pop_due(time.monotonic()):
            try:
                tx.send(frame)
            except (BlockingIOError, OSError) as e:
                if e.errno in (19, 6):  # ENODEV, ENXIO: the link is gone
                    return
                # else: a full queue drops the packet, as a congested link would
        if now - checked > 1.0:
            checked = now
            try:
                os.kill(owner_pid, 0)
            except ProcessLookupError:
                return


def start_relay(
    prefix: Sequence[str],
    *,
    listen: str,
    send: str,
    delay_ms: float,
    jitter_ms: float,
    seed: int,
    owner_pid: int,
    log_path: str,
    reorder: bool = False,
    duplicate_percent: float = 0.0,
    timeout: float = 15.0,
) -> int:
    """Start a relay process (``prefix``: e.g. ``ip netns exec NS``) that ends with
    ``owner_pid`` and writes its errors to ``log_path``, and wait until it reads; its pid.

    Raises:
        OSError: it exited or did not become ready within ``timeout`` (its error, one line).
    """
    kraft_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = [kraft_root, *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    argv = [
        *prefix, sys.executable, "-m", "kraft.cluster.netns_relay",
        "--listen", listen, "--send", send, "--delay-ms", str(delay_ms),
        "--jitter-ms", str(jitter_ms), "--seed", str(seed), "--owner-pid", str(owner_pid),
        "--duplicate-percent", str(duplicate_percent), *(("--reorder",) if reorder else ()),
    ]  # fmt: skip
    with open(log_path, "a") as log:
        child = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            start_new_session=True,  # a Ctrl-C of the terminal reaches the owner, which stops it
        )
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], timeout)
    line = child.stdout.readline().strip() if ready else ""
    child.stdout.close()
    if line != READY:
        child.kill()
        child.wait(5)
        with open(log_path) as log:
            last = log.read().strip().splitlines()
        raise OSError(f"the delay relay did not start: {last[-1] if last else 'no answer'}")
    return child.pid


def stop_relay(pid: int) -> None:
    """SIGTERM a relay (it may already be gone) and, if it is this process's child, reap it."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # another process's: it exits on its own
            return
        time.sleep(0.01)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kraft.cluster.netns_relay")
    p.add_argument("--listen", required=True, help="the veth end the filter redirects to")
    p.add_argument("--send", required=True, help="the interface to write the packets onto")
    p.add_argument("--delay-ms", type=float, required=True)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--owner-pid", type=int, required=True)
    p.add_argument("--reorder", action="store_true", help="a packet may overtake another")
    p.add_argument("--duplicate-percent", type=float, default=0.0)
    args = p.parse_args(argv)
    try:
        relay(
            args.listen,
            args.send,
            args.delay_ms,
            args.jitter_ms,
            args.seed,
            args.owner_pid,
            reorder=args.reorder,
            duplicate_percent=args.duplicate_percent,
        )
    except OSError as e:
        print(f"netns relay {args.listen} -> {args.send}: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["main", "relay", "start_relay", "stop_relay"]
