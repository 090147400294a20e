"""The wire contract and the architecture rules that keep kraft honest.

- the committed generated code matches proto/;
- proto's ErrorCode and Python's are the same enum, and each code has exactly one exception;
- dependencies point one way (storage <- kraft <- replication <- spark), the CLI excepted;
- pure cores import no I/O, clock or global randomness (STYLE §1).
"""

from __future__ import annotations

import ast
import importlib.util
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kraft._generated import errors_pb2
from storage.errors import ERROR_CLASSES, ErrorCode, KraftError, error_for

ROOT = Path(__file__).resolve().parents[1]


def test_generated_code_is_fresh_against_proto() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "proto" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_pyproject_floors_admit_only_runtimes_the_generated_code_accepts() -> None:
    """A library user gets grpcio and protobuf from pyproject's ranges, not from the lock: the
    generated modules refuse to import below the versions they were generated for."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    from tests.lockcheck import ranges

    spec = importlib.util.spec_from_file_location("generate", ROOT / "proto" / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    floors = {r.name: r for r in map(Requirement, ranges()) if r.name in {"grpcio", "protobuf"}}
    for name, needed in generate.runtime_floors(generate.committed()).items():
        lowest = min(Version(s.version) for s in floors[name].specifier if s.operator == ">=")
        assert lowest >= Version(needed), f"pyproject.toml: {name}>={needed} (generated code)"


def test_proto_and_python_error_codes_are_the_same_enum() -> None:
    proto = {v.name: v.number for v in errors_pb2.DESCRIPTOR.enum_types_by_name["ErrorCode"].values}
    python = {c.name: c.value for c in ErrorCode}
    assert proto == python


def test_every_error_code_but_none_has_exactly_one_exception_class() -> None:
    assert set(ERROR_CLASSES) == set(ErrorCode) - {ErrorCode.NONE}
    codes = [cls.code for cls in KraftError.__subclasses__()]
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize("code", sorted(set(ErrorCode) - {ErrorCode.NONE}))
def test_error_for_maps_a_wire_code_to_its_class_and_pickles(code: ErrorCode) -> None:
    err = error_for(code, "boom")
    assert err.code is code and err.message == "boom"
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err) and again.message == "boom"


def test_unknown_wire_code_becomes_unknown_server_error() -> None:
    assert error_for(31337).code is ErrorCode.UNKNOWN_SERVER_ERROR


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


LAYERS = {"storage": 0, "kraft": 1, "replication": 2, "spark": 3}


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_dependencies_point_one_way(package: str) -> None:
    bad: list[str] = []
    for path in (ROOT / package).rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[:2] in {("kraft", "cli"), ("kraft", "bench"), ("kraft", "_generated")}:
            continue  # composition roots (commands) may import everything, lazily
        if rel.parts[:2] in {("kraft", "demo"), ("kraft", "compare")}:
            continue  # the main job and `kraft compare` are commands too
        if rel.parts[:2] == ("kraft", "interop"):
            continue  # `kraft interop diff` drives both systems with the listener's kio codec
        if rel.name == "cli.py" and rel.parts[0] == "kraft":
            continue
        for name in _imports(path):
            top = name.split(".")[0]
            if top in LAYERS and LAYERS[top] > LAYERS[package]:
                bad.append(f"{rel} imports {name}")
    assert not bad, "\n".join(bad)


CORE_DIRS = [
    "kraft/raft",
    "kraft/metadata",
    "kraft/controller",
    "replication/core",
    "replication/group",
]
SHELL_NAMES = {"server.py", "service.py", "shell.py", "process.py", "transport.py", "client.py"}
FORBIDDEN = {"grpc", "asyncio", "time", "os", "rocksdict", "socket", "threading", "random"}


def test_pure_cores_import_no_io_clock_or_randomness() -> None:
    bad: list[str] = []
    for d in CORE_DIRS:
        for path in (ROOT / d).rglob("*.py"):
            if path.name in SHELL_NAMES:
                continue
            for name in _imports(path):
                if name.split(".")[0] in FORBIDDEN and name != "random":
                    bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_pure_cores_use_only_an_injected_random_generator() -> None:
    """``random.Random`` may appear (as the injected generator's type); module-level
    ``random.random()``, ``random.choice()``... draw from the global seed and may not."""
    bad: list[str] = []
    for d in CORE_DIRS:
        for path in (ROOT / d).rglob("*.py"):
            if path.name in SHELL_NAMES:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "random"
                    and node.attr != "Random"
                ):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} uses random.{node.attr}")
    assert not bad, "\n".join(bad)


def _unit(module: str) -> str | None:
    """The unit a module belongs to for the no-cycle rule: its subpackage (``kraft.raft``) or,
    for a module at a package's top (``kraft.types``), the module itself."""
    parts = module.split(".")
    if parts[0] not in LAYERS or len(parts) < 2 or parts[1] == "_generated":
        return None
    if (ROOT / parts[0] / parts[1]).is_dir() or (ROOT / parts[0] / f"{parts[1]}.py").is_file():
        return f"{parts[0]}.{parts[1]}"
    return None  # a name imported from the package itself (``from kraft import X``)


def _unit_imports() -> dict[str, set[str]]:
    """unit -> the other units it imports, counting lazy (function-level) imports too."""
    edges: dict[str, set[str]] = {}
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
            source = _unit(".".join(parts))
            if source is None:
                continue
            for name in _imports(path):
                target = _unit(name)
                if target is not None and target != source:
                    edges.setdefault(source, set()).add(target)
    return edges


def test_no_import_cycle_between_subpackages_or_top_level_modules() -> None:
    """Within kraft, replication, storage and spark, no subpackage or top-level module imports
    one that (directly or not) imports it back: each folder is a concern with a direction."""
    edges = _unit_imports()
    cycles: list[str] = []
    done: set[str] = set()

    def visit(unit: str, path: list[str]) -> None:
        for target in sorted(edges.get(unit, ())):
            if target in path:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in done:
                visit(target, [*path, target])
        done.add(unit)

    for unit in sorted(edges):
        if unit not in done:
            visit(unit, [unit])
    assert not cycles, "\n".join(sorted(set(cycles)))


def test_the_cycle_rule_sees_a_cycle() -> None:
    """The rule above would fail on kraft/config.py <-> kraft/controller, the cycle it was
    written against: a module named like a unit maps to it, lazily or not."""
    assert _unit("kraft.controller.server") == "kraft.controller"
    assert _unit("kraft.types") == "kraft.types"
    assert _unit("kraft._generated.raft_pb2") is None
    assert "kraft.controller" in _unit_imports()["kraft.cluster"]


def _module_imports(root: Path, package: Path) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports, anywhere in the file: at the top, in a
    function (lazily) or under ``TYPE_CHECKING``; relative imports resolved."""
    modules: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = module.split(".")
                    if path.name != "__init__.py":
                        here = here[:-1]
                    here = here[: len(here) - node.level + 1]
                    base = ".".join([*here, base] if base else here)
                targets.add(base)
                targets.update(f"{base}.{alias.name}" for alias in node.names)
        edges[module] = {t for t in targets if t in modules and t != module}
    return edges


def _module_cycles(root: Path, package: Path) -> list[str]:
    edges = _module_imports(root, package)
    cycles: set[str] = set()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(edges.get(module, ())):
            if target in path:
                cycles.add(" -> ".join([*path[path.index(target) :], target]))
            elif target not in done:
                visit(target, [*path, target])
        done.add(module)

    for module in sorted(edges):
        if module not in done:
            visit(module, [module])
    return sorted(cycles)


def test_no_import_circle_between_the_modules_of_the_broker() -> None:
    """replication/broker/ is layered (transports -> api -> services -> replicas, lifecycle,
    controller and inter-broker channels -> storage): no module imports one that imports it
    back, not even lazily or for type checking only (issue 24: server, service, group_service,
    group_servicer and fetcher once did)."""
    assert _module_cycles(ROOT, ROOT / "replication" / "broker") == []


def test_the_broker_circle_rule_sees_a_circle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n"
    )
    (package / "b.py").write_text("def f():\n    from . import c\n")
    (package / "c.py").write_text("from .a import A\n")
    assert _module_cycles(tmp_path, package) == ["pkg.a -> pkg.b -> pkg.c -> pkg.a"]


# --- one partition driver (issue 11) ---------------------------------------------------------

DRIVER_SHELLS = [
    "replication/broker/replicas/partition.py",
    "replication/sim/broker.py",
    "tests/replication/harness.py",
]
"""The broker, ``kraft sim cluster`` and the replication test harness: each opens its
replicas through the one driver selector, so the simulator runs the broker's wiring."""

SIM_BROKER = "replication/sim/broker.py"
SIM_BROKER_REQUESTS = "replication/sim/broker_requests.py"

CORE_GLUE_CALLS = {
    # feeding a partition core and applying its Ready
    "ready",
    "advance",
    "has_ready",
    "handle_partition_change",
    "handle_produce_request",
    "on_appended",
    "on_append_failed",
    "handle_alter_partition_response",
    # the log writes a Ready asks for
    "append_as_follower",
    "truncate_to",
    "truncate_fully_and_start_at",
    "assign_leader_epoch",
}
CORE_CLASSES = {
    "PartitionLeader",
    "PartitionFollower",
    "IsrPartitionDriver",
    "QuorumPartitionDriver",
}


def _glue_modules() -> list[Path]:
    """Every module that may not hold partition glue: replication/ outside its core and its
    driver, and the replication test harness."""
    paths = [
        path
        for path in (ROOT / "replication").rglob("*.py")
        if path.relative_to(ROOT).parts[:2]
        not in {("replication", "core"), ("replication", "driver")}
    ]
    return [*paths, ROOT / "tests" / "replication" / "harness.py"]


def _called_names(tree: ast.AST) -> list[tuple[int, str]]:
    calls: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                calls.append((node.lineno, "." + func.attr))
                if func.attr == "assign" and isinstance(func.value, ast.Attribute):
                    calls.append((node.lineno, f".{func.value.attr}.assign"))
            elif isinstance(func, ast.Name):
                calls.append((node.lineno, func.id))
    return calls


@pytest.mark.parametrize("shell", DRIVER_SHELLS)
def test_the_broker_the_simulator_and_the_harness_open_replicas_through_one_driver(
    shell: str,
) -> None:
    tree = ast.parse((ROOT / shell).read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "replication.driver"
        for alias in node.names
    }
    assert "open_partition_driver" in imported, f"{shell} does not use replication.driver"
    assert "open_partition_driver" in {name for _, name in _called_names(tree)}


def test_the_simulator_answers_produce_and_fetch_with_the_brokers_handlers() -> None:
    """Issue 24: the simulated broker routes Produce and answers Fetch (followers' and
    consumers') through `BrokerService`, so the seeds check the request handling the broker
    runs; it reads no log and feeds no follower fetch to a core itself."""
    calls = {
        name
        for module in (SIM_BROKER, SIM_BROKER_REQUESTS)
        for _, name in _called_names(ast.parse((ROOT / module).read_text()))
    }
    assert {".produce_to", ".produce_answered", ".fetch_once", "fetch_satisfied"} <= calls
    own_copies = calls & {".read", ".handle_follower_fetch"}
    assert not own_copies, own_copies


def test_the_shells_get_the_same_driver_class() -> None:
    """At run time too: the broker's replica, the simulator's and the harness's are one
    class (the ISR driver today)."""
    import tempfile

    from replication.broker.replicas.partition import PartitionReplica
    from replication.driver import IsrPartitionDriver
    from replication.sim import BrokerCluster, ClusterChecker, ClusterConfig
    from replication.sim.admin import TopicCreator
    from storage.config import LogConfig
    from tests.replication.harness import TP, Cluster

    async def never(_request: object) -> object:
        raise AssertionError

    with tempfile.TemporaryDirectory() as directory:
        replica = PartitionReplica(
            topic_partition=TP,
            topic_id="tid",
            directory=Path(directory),
            log_config=LogConfig(),
            local_id=1,
            broker_epoch=1,
            fetch_from_leader=never,  # type: ignore[arg-type]
            send_alter_partition=lambda _replica, _send: None,
        )
        try:
            assert type(replica.driver) is IsrPartitionDriver
        finally:
            replica.stop()
    assert type(Cluster((1, 2)).replicas[1].driver) is IsrPartitionDriver
    sim = BrokerCluster(seed=1, config=ClusterConfig(), checker=ClusterChecker())
    TopicCreator(sim, random.Random(1), node_id=900).start(50)
    sim.scheduler.run_until(1_000)
    drivers = [r.driver for b in sim.brokers.values() for r in b.replicas.values()]
    assert drivers and {type(d) for d in drivers} == {IsrPartitionDriver}


def test_no_module_outside_the_driver_feeds_a_partition_core_or_writes_its_log() -> None:
    """The glue between a partition core and its log has one home, ``replication/driver``:
    nobody else builds a core or a driver, applies a Ready, or does the log writes a Ready
    asks for (a second copy is a seam that was not drawn: STYLE.md)."""
    bad: list[str] = []
    for path in _glue_modules():
        for line, name in _called_names(ast.parse(path.read_text())):
            if (
                name.lstrip(".") in CORE_GLUE_CALLS and name.startswith(".")
            ) or name in CORE_CLASSES | {".leader_epoch_cache.assign"}:
                bad.append(f"{path.relative_to(ROOT)}:{line} calls {name}")
    assert not bad, "\n".join(bad)


def test_only_the_selector_builds_a_partition_driver() -> None:
    """`open_partition_driver` is the one place a topic's replication mode picks a driver."""
    bad: list[str] = []
    for path in (ROOT / "replication").rglob("*.py"):
        if path.relative_to(ROOT).as_posix() == "replication/driver/select.py":
            continue
        for line, name in _called_names(ast.parse(path.read_text())):
            if name in {"IsrPartitionDriver", "QuorumPartitionDriver"}:
                bad.append(f"{path.relative_to(ROOT)}:{line}")
    assert not bad, "\n".join(bad)


# --- one home for channels and servers (issue 11) ----------------------------------------------

_CHANNEL_BUILDERS = {"insecure_channel", "secure_channel", "server", "add_insecure_port"}


def test_only_the_channels_module_builds_grpc_channels_and_servers() -> None:
    """Every channel and server comes from `kraft.transport.channels`, so TLS is one change.
    The benches' raw-gRPC baselines are exempt: they measure gRPC itself."""
    home = ROOT / "kraft" / "transport" / "channels.py"
    bad: list[str] = []
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT)
            if path == home or rel.parts[:2] in {("kraft", "_generated"), ("kraft", "bench")}:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in _CHANNEL_BUILDERS:
                    base = ast.unparse(node.value)
                    if base in {"grpc", "grpc.aio"} or node.attr == "add_insecure_port":
                        bad.append(f"{rel}:{node.lineno} {base}.{node.attr}")
    assert not bad, "\n".join(bad)
