"""docs/operations.md's multi-machine broker properties, for the netns tests that check a
`NetnsCluster` writes what the page tells an operator to write (the page and the harness kept in
step)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
_BLOCK = re.compile(r"```properties\n(.*?)```", re.S)
_ADDRESS = re.compile(r"\b(?!0\.0\.0\.0\b)\d+\.\d+\.\d+\.\d+\b")
LISTENER_KEYS = ("listeners", "advertised.listeners", "listener.security.protocol.map")
OPTIONAL_KEYS = frozenset({"broker.rack"})


def broker_example(*, tls: bool) -> dict[str, str]:
    """The multi-machine section's ``broker-101.properties`` (plaintext, or its TLS one)."""
    for block in _BLOCK.findall(OPERATIONS.read_text()):
        lines = [line.strip() for line in block.splitlines()]
        props = dict(
            line.partition("=")[::2] for line in lines if line and not line.startswith("#")
        )
        if props.get("node.id") == "101" and ("ssl.keystore.location" in props) == tls:
            return props
    raise AssertionError(f"docs/operations.md has no broker-101 example (tls={tls})")


def listener_shape(props: Mapping[str, str]) -> dict[str, str]:
    """The listener keys with every host address (not ``0.0.0.0``) written ``HOST``."""
    return {key: _ADDRESS.sub("HOST", props.get(key, "")) for key in LISTENER_KEYS}


def check_in_step(written: Mapping[str, str], *, tls: bool) -> None:
    """A broker's properties file has the page's keys and listeners (its addresses aside)."""
    example = broker_example(tls=tls)
    assert set(written) == set(example) - OPTIONAL_KEYS, (sorted(written), sorted(example))
    assert listener_shape(written) == listener_shape(example)
