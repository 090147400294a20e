"""The config registry (`storage.config_registry`) is the one table of config keys: the
per-layer tables derive from it, every config class agrees with its defaults, and
docs/operations.md lists exactly its keys with their defaults."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from kraft.controller.core import ControllerConfig
from kraft.controller.node_config import ControllerNodeConfig
from kraft.metadata import BROKER_CONFIGS, TOPIC_CONFIGS
from kraft.raft import RaftConfig
from replication.broker.config import BrokerNodeConfig
from replication.core import ReplicationConfig
from storage.config import PROPERTY_KEYS, LogConfig
from storage.config_docs import TABLES, markdown_table, rewrite_doc
from storage.config_registry import (
    BROKER_LOG_KEYS,
    DYNAMIC_BROKER_KEYS,
    DYNAMIC_NODE_KEYS,
    NODE_REGISTRY,
    REGISTRY,
    TOPIC_REGISTRY,
    ConfigKey,
    Reader,
)
from storage.errors import InvalidConfigError

ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = ROOT / "docs" / "operations.md"
_VOTERS = {"controller.quorum.voters": "1@127.0.0.1:9091"}


def _instances() -> dict[str, Any]:
    broker = BrokerNodeConfig.from_properties(
        {**_VOTERS, "node.id": "101", "listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": "d"}
    )
    controller = ControllerNodeConfig.from_properties({**_VOTERS, "node.id": "1", "log.dirs": "d"})
    return {
        "LogConfig": LogConfig(),
        "RaftConfig": RaftConfig(),
        "ReplicationConfig": ReplicationConfig(),
        "ControllerConfig": ControllerConfig(),
        "BrokerNodeConfig": broker,
        "ControllerNodeConfig": controller,
    }


def test_each_key_is_defined_once_per_namespace() -> None:
    for keys in (TOPIC_REGISTRY, NODE_REGISTRY):
        names = [k.name for k in keys]
        assert len(names) == len(set(names))
    synonyms = [k.synonym for k in TOPIC_REGISTRY if k.synonym]
    assert len(synonyms) == len(set(synonyms))
    node_names = {k.name for k in NODE_REGISTRY}
    assert not node_names & set(synonyms), "a synonym is derived, never a second entry"


def test_every_config_class_takes_its_defaults_from_the_registry() -> None:
    instances = _instances()
    checked = 0
    for key in REGISTRY:
        if key.owner is None:
            continue
        assert key.field is not None, key.name
        value = getattr(instances[key.owner], key.field)
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        assert shown == key.default, f"{key.owner}.{key.field} vs {key.name}"
        checked += 1
    assert checked >= 35


@pytest.mark.parametrize(
    "config_class",
    [LogConfig, RaftConfig, ReplicationConfig, ControllerConfig],
    ids=lambda c: c.__name__,
)
def test_every_setting_of_a_config_class_is_a_registry_key(config_class: type) -> None:
    owned = {k.field for k in REGISTRY if k.owner == config_class.__name__}
    fields = {f.name for f in dataclasses.fields(config_class)} - {"sync_every_append"}
    assert fields == owned


def test_the_per_layer_tables_derive_from_the_registry() -> None:
    assert dict(PROPERTY_KEYS) == {
        k.name: k.field for k in TOPIC_REGISTRY if k.owner == "LogConfig"
    }
    assert set(TOPIC_CONFIGS) == {k.name for k in TOPIC_REGISTRY}
    assert set(BROKER_CONFIGS) == {k.synonym for k in TOPIC_REGISTRY if k.synonym} | set(
        DYNAMIC_NODE_KEYS
    )
    assert set(BROKER_LOG_KEYS.values()) == set(PROPERTY_KEYS)
    for broker_key, topic_key in BROKER_LOG_KEYS.items():
        assert TOPIC_CONFIGS[topic_key].synonym == broker_key
        assert DYNAMIC_BROKER_KEYS[broker_key].default == TOPIC_CONFIGS[topic_key].default


def _names_a_key_or_field(value: str, names: set[str]) -> bool:
    """A table's value: another key (a synonym) or a field name, not a config value such as
    ``"3000"`` or ``"true"`` (a run's overrides are values, not a second table)."""
    return value in names or (value.isidentifier() and value not in ("true", "false"))


def _key_tables(tree: ast.AST, names: set[str]) -> list[int]:
    """Lines of dict literals that map two or more config key names to other key names or
    field names (a second table of keys)."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        pairs = [
            (k.value, v.value)
            for k, v in zip(node.keys, node.values, strict=True)
            if isinstance(k, ast.Constant)
            and k.value in names
            and isinstance(v, ast.Constant)
            and isinstance(v.value, str)
            and _names_a_key_or_field(v.value, names)
        ]
        if len(pairs) >= 2:
            lines.append(node.lineno)
    return lines


def test_no_second_table_of_config_keys_remains() -> None:
    """A dict of Kafka key -> field or -> synonym outside the registry is a second table that
    will drift (two such tables disagreed on 5 keys before the registry existed)."""
    names = {k.name for k in REGISTRY} | set(DYNAMIC_BROKER_KEYS)
    offenders = []
    for package in ("storage", "kraft", "replication", "spark"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "_generated" in path.parts or path.name == "config_registry.py":
                continue
            for line in _key_tables(ast.parse(path.read_text()), names):
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []


def test_the_scanner_finds_a_table_of_keys() -> None:
    tree = ast.parse('KEYS = {"retention.ms": "retention_ms", "segment.ms": "segment_ms"}')
    assert _key_tables(tree, {"retention.ms", "segment.ms"}) == [1]


# --- docs/operations.md -----------------------------------------------------------------------

_ROW = re.compile(r"^\| `(?P<key>[a-z.]+)`[^|]*\| (?P<default>[^|]*) \|")


def _doc_tables() -> dict[str, dict[str, str]]:
    """Each generated table of docs/operations.md, parsed: key -> default cell."""
    text = OPERATIONS.read_text()
    tables: dict[str, dict[str, str]] = {}
    for name in TABLES:
        begin = f"<!-- generated from storage/config_registry.py: {name} -->"
        assert begin in text, f"docs/operations.md has no {name} table"
        block = text[
            text.index(begin) : text.index("<!-- end of generated table -->", text.index(begin))
        ]
        rows = [m for line in block.splitlines() if (m := _ROW.match(line))]
        tables[name] = {m["key"]: m["default"] for m in rows}
    return tables


def _expected(name: str) -> dict[str, ConfigKey]:
    if name == "topic":
        return {k.name: k for k in TOPIC_REGISTRY}
    if name == "raft":
        return {k.name: k for k in NODE_REGISTRY if k.owner == "RaftConfig"}
    reader = Reader.CONTROLLER if name == "controller" else Reader.BROKER
    keys = {k.name: k for k in NODE_REGISTRY if reader in k.readers and k.owner != "RaftConfig"}
    if reader is Reader.BROKER:
        for k in TOPIC_REGISTRY:
            if k.synonym is not None and k.owner is not None:
                keys[k.synonym] = k
    return keys


@pytest.mark.parametrize("name", TABLES)
def test_operations_md_lists_exactly_the_registry_keys_with_their_defaults(name: str) -> None:
    documented = _doc_tables()[name]
    expected = _expected(name)
    assert set(documented) == set(expected)
    for key, default in documented.items():
        definition = expected[key]
        if definition.default is not None:
            assert default.split(" ")[0] == definition.default, key
        else:
            assert default == definition.shown_default, key


def test_operations_md_tables_are_the_generated_ones() -> None:
    """Run ``python -m storage.config_docs docs/operations.md`` to regenerate them."""
    text = OPERATIONS.read_text()
    assert rewrite_doc(text) == text
    assert all(markdown_table(name) in text for name in TABLES)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("broker.heartbeat.interval.ms", "0"),
        ("log.retention.check.interval.ms", "-5"),
        ("replica.high.watermark.checkpoint.interval.ms", "0"),
        ("min.insync.replicas", "0"),
    ],
)
def test_a_broker_property_outside_its_registry_range_stops_the_broker(
    key: str, value: str
) -> None:
    props = {**_VOTERS, "node.id": "101", "listeners": "PLAINTEXT://127.0.0.1:9092"}
    with pytest.raises(InvalidConfigError) as caught:
        BrokerNodeConfig.from_properties({**props, "log.dirs": "d", key: value})
    assert key in caught.value.message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("broker.session.timeout.ms", "0"),
        ("num.partitions", "0"),
        ("metadata.log.max.record.bytes.between.snapshots", "-1"),
        ("socket.request.max.bytes", "100"),
    ],
)
def test_a_controller_property_outside_its_registry_range_stops_the_controller(
    key: str, value: str
) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        ControllerNodeConfig.from_properties(
            {**_VOTERS, "node.id": "1", "log.dirs": "d", key: value}
        )
    assert key in caught.value.message


def test_the_table_check_sees_a_table_of_fields_but_not_a_runs_overrides() -> None:
    names = {"min.insync.replicas", "retention.ms"}
    table = ast.parse('T = {"min.insync.replicas": "min_insync_replicas", "retention.ms": "r"}')
    overrides = ast.parse('C = {"min.insync.replicas": "2", "retention.ms": "3000"}')
    assert _key_tables(table, names) == [1]
    assert _key_tables(overrides, names) == []
