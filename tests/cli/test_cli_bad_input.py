"""Bad input to the `kraft` command line that needs no cluster: one clear line on stderr and a
non-zero exit, never a traceback, a wait for a deadline or a silent wrong answer."""

from __future__ import annotations

import importlib.abc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from kraft.cli import main
from tests.interrupts import python_interruptible


def kraft(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KRAFT_")}
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def one_line_error(out: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit code non-zero, and stderr is one ``kraft: error:`` line naming every fragment."""
    assert out.returncode not in (0, None), out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kraft: error:"), out.stderr
    for fragment in fragments:
        assert fragment in lines[0], out.stderr
    return lines[0]


def test_an_unknown_log_level_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    out = kraft("--log-level", "bogus", "sim", "raft", "--seeds", "1")
    assert out.returncode == 2
    one_line_error(out, "--log-level", "bogus", "debug")
    assert kraft("--log-level", "INFO", "sim", "raft", "--seeds", "1").returncode == 0
    nodes = kraft("cluster", "up", "--node-log-level", "bogus", "--data-dir", str(tmp_path))
    assert nodes.returncode == 2
    one_line_error(nodes, "--node-log-level", "bogus")
    assert list(tmp_path.iterdir()) == []  # refused before anything started


def test_a_sim_with_zero_partitions_is_refused_not_a_traceback() -> None:
    out = kraft("sim", "cluster", "--seeds", "2", "--partitions", "0")
    assert out.returncode == 2
    one_line_error(out, "--partitions", ">= 1", "'0'")


@pytest.mark.parametrize(
    "argv",
    [
        ["sim", "raft", "--seeds", "-1"],
        ["sim", "raft", "--seeds", "0"],
        ["sim", "raft", "--start", "-1"],
        ["sim", "raft", "--seed", "-16"],
        ["sim", "raft", "--voters", "0"],
        ["sim", "raft", "--observers", "-1"],
        ["sim", "cluster", "--partitions", "-3"],
        ["sim", "cluster", "--brokers", "0"],
        ["sim", "cluster", "--processes", "0"],
        ["bench", "storage", "--total-mb", "0"],
        ["bench", "storage", "--synced-mb", "-1"],
        ["bench", "raft", "--entries", "-1"],
        ["bench", "raft", "--failover-runs", "-1"],
        ["bench", "failover", "--runs", "0"],
        ["bench", "produce", "--records", "-5"],
        ["bench", "consume", "--record-size", "0"],
        ["bench", "spark", "--rounds", "0"],
        ["topics", "create", "t", "--partitions", "-1"],
        ["topics", "create", "t", "--replication-factor", "0"],
        ["consume", "t", "--partition", "-1"],
        ["produce", "t", "--partition", "-2"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_negative_and_zero_counts_are_refused_before_anything_runs(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("kraft: error: argument "), err
    assert argv[-2] in err and repr(argv[-1]) in err and ">=" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "list", "--timeout", "nan"],
        ["topics", "create", "t", "--timeout", "-1"],
        ["quorum", "describe", "--timeout", "inf"],
        ["produce", "t", "--timeout", "0"],
        ["consume", "t", "--timeout", "-0.5"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_a_timeout_that_never_or_already_ended_is_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a hang (``nan``, ``inf``) nor a deadline already past."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "argument --timeout: expected seconds" in err, err
    assert repr(argv[-1]) in err


def test_a_non_number_count_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sim", "raft", "--seeds", "x" * 500])
    err = capsys.readouterr().err.strip()
    assert "argument --seeds: expected an integer" in err and len(err) < 200  # input cut


class _InterruptImport(importlib.abc.MetaPathFinder):
    """Raise KeyboardInterrupt when ``name`` is imported: Ctrl-C while startup imports run."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname: str, path: object, target: ModuleType | None = None) -> None:
        if fullname == self.name:
            raise KeyboardInterrupt
        return None


def test_ctrl_c_during_startup_imports_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "kraft.logs", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_InterruptImport("kraft.logs"), *sys.meta_path])
    assert main(["sim", "raft", "--seeds", "1"]) == 130


@pytest.mark.parametrize("after", ["kraft.cli.cluster", "kraft.cli.topics", "structlog"])
def test_ctrl_c_while_startup_imports_run_ends_130_without_a_traceback(after: str) -> None:
    """SIGINT as soon as the child reports (``-X importtime``) that ``after`` was imported,
    i.e. while the command's own imports are still running."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KRAFT_")}
    process = subprocess.Popen(
        python_interruptible(
            module="kraft.cli", args=("sim", "raft", "--seeds", "9999"), flags=("-X", "importtime")
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    seen: list[str] = []
    for line in process.stderr:  # ends when the child does
        seen.append(line)
        if line.startswith("import time:") and line.split("|")[-1].strip() == after:
            process.send_signal(signal.SIGINT)
            break
    rest = process.stderr.read()
    process.wait(timeout=60)
    err = "".join(seen) + rest
    assert seen[-1].split("|")[-1].strip() == after, err[-2000:]
    assert process.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]


@pytest.mark.parametrize("command", ["controller", "broker", "cluster-up"])
def test_a_data_dir_that_is_a_file_is_one_line(tmp_path: Path, command: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    for data_dir in (a_file, a_file / "below"):
        if command == "controller":
            argv = ["controller", "--node-id", "1", "--controller-quorum-voters"]
            argv += ["1@127.0.0.1:1", "--data-dir", str(data_dir)]
        elif command == "broker":
            argv = ["broker", "--node-id", "101", "--listen", "127.0.0.1:1"]
            argv += ["--controller-quorum-voters", "1@127.0.0.1:2", "--data-dir", str(data_dir)]
        else:
            argv = ["cluster", "up", "--detach", "--data-dir", str(data_dir)]
        line = one_line_error(kraft(*argv), "--data-dir", str(data_dir), "is not a directory")
        assert "Traceback" not in line
    assert a_file.read_text() == "not a directory\n"


def test_a_log_dirs_file_in_the_config_is_named_by_its_key(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    config = tmp_path / "controller.properties"
    config.write_text(f"node.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\nlog.dirs={a_file}\n")
    one_line_error(kraft("controller", "--config", str(config)), "log.dirs", "not a directory")


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("localhost", "no port"),
        (":99999", "no host"),
        ("localhost:0", "1 to 65535"),
        ("http://127.0.0.1:9092", "scheme"),
    ],
)
def test_a_malformed_bootstrap_address_fails_at_once(address: str, problem: str) -> None:
    for argv in (
        ["topics", "list", "--bootstrap", address],
        ["topics", "list", "--bootstrap-controller", address],
        ["consume", "t", "--bootstrap", address],
        ["produce", "t", "--bootstrap", address],
        ["quorum", "describe", "--bootstrap-controller", address],
    ):
        started = time.monotonic()
        one_line_error(kraft(*argv), argv[-2], repr(address), problem)
        assert time.monotonic() - started < 8, argv  # not the 10 s connect deadline


def test_creating_the_internal_offsets_topic_by_hand_is_refused() -> None:
    out = kraft("topics", "create", "__consumer_offsets", "--bootstrap", "127.0.0.1:1")
    one_line_error(out, "__consumer_offsets is internal")


def test_an_election_type_or_offset_spec_kraft_does_not_know_is_one_line() -> None:
    out = kraft("topics", "elect-leaders", "--type", "random", "--bootstrap", "127.0.0.1:1")
    one_line_error(out, "--type", "random")
    out = kraft("topics", "offsets", "t", "--time", "yesterday", "--bootstrap", "127.0.0.1:1")
    one_line_error(out, "yesterday")
    out = kraft("topics", "elect-leaders", "--partition", "0", "--bootstrap", "127.0.0.1:1")
    one_line_error(out, "--partition needs --topic")
