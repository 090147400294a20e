"""The README's examples run as written: the local-cluster Python example, and the Security
section's walk-through on ``kraft cluster up --tls --authorizer`` (its ``sh`` block, line by
line)."""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# `kraft cluster up` on its default ports (9090-9092): one pytest-xdist worker runs every such
# test (tests/conftest.py), or two clusters race for the ports and a command finds the other.
pytestmark = pytest.mark.xdist_group("default-ports")

ROOT = Path(__file__).resolve().parents[2]


def readme_blocks(language: str, section: str | None = None) -> list[str]:
    """The README's fenced ``language`` blocks (of the ``## section`` only, if given)."""
    text = (ROOT / "README.md").read_text()
    if section is not None:
        start = text.index(f"\n## {section}")
        end = text.find("\n## ", start + 1)
        text = text[start : end if end >= 0 else len(text)]
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


@pytest.mark.process
def test_readme_local_cluster_example_runs(tmp_path: Path) -> None:
    (example,) = [b for b in readme_blocks("python") if "LocalCluster(" in b]
    result = subprocess.run(
        [sys.executable, "-c", example],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("RecordMetadata(topic='events'"), result.stdout
    assert result.stderr == "", result.stderr  # a library prints nothing unasked


# -- the README's shell walk-throughs --------------------------------------------------------


class Shell:
    """Runs a README ``sh`` block line by line, the ``kraft`` commands in this process (a
    subprocess per command costs seconds of start-up on a loaded machine): ``kraft ...``,
    ``seq A B | kraft ...``, ``kraft ... | wc -l``, ``kraft ... | tail -N``, ``export K=V`` and
    ``eval "$(kraft ...)"``. A line whose comment says ``# refused: CODE`` must fail with
    CODE on stderr; every other line must succeed. Anything else is not in the subset and
    fails the test (the README must stay runnable)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
        self._monkeypatch = monkeypatch
        self._capsys = capsys
        for key in [k for k in os.environ if k.startswith("KRAFT_")]:
            monkeypatch.delenv(key)

    def kraft(self, argv: list[str], stdin: str = "") -> tuple[int, str, str]:
        from kraft.cli import main

        data = io.BytesIO(stdin.encode())
        self._monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(data))
        self._capsys.readouterr()
        code = main(argv)
        out = self._capsys.readouterr()
        return code, out.out, out.err

    def export(self, words: list[str]) -> None:
        for word in words:
            name, _, value = word.partition("=")
            self._monkeypatch.setenv(name, value)

    def run(self, line: str) -> str:
        """Run one line; its stdout."""
        refused = re.search(r"#\s*refused:\s*(\w+)", line)
        words = shlex.split(line, comments=True)
        stdin, count = "", False
        if words[:1] == ["seq"] and "|" in words:
            cut = words.index("|")
            low, high = int(words[1]), int(words[2])
            stdin = "".join(f"{n}\n" for n in range(low, high + 1))
            words = words[cut + 1 :]
        tail = 0
        if words[-3:] == ["|", "wc", "-l"]:
            count, words = True, words[:-3]
        elif len(words) > 3 and words[-3:-1] == ["|", "tail"] and words[-1].startswith("-"):
            tail, words = int(words[-1][1:]), words[:-3]
        if words[0] == "export":
            self.export(words[1:])
            return ""
        if words[0] == "eval" and len(words) == 2 and words[1].startswith("$(kraft "):
            code, out, err = self.kraft(shlex.split(words[1][len("$(kraft ") : -1]))
            assert code == 0, f"{line}\n{err}"
            self.export([w for w in shlex.split(out) if w != "export"])
            return out
        assert words[0] == "kraft" and "|" not in words, f"not in the subset: {line}"
        code, out, err = self.kraft(words[1:], stdin)
        if refused:
            assert code == 1 and refused.group(1) in err, f"{line}: not refused\n{out}{err}"
        else:
            assert code == 0, f"{line}\n{out}{err}"
        if tail:
            return "".join(f"{x}\n" for x in out.splitlines()[-tail:])
        return f"{len(out.splitlines())}\n" if count else out


def run_walk_through(
    section: str,
    data_dir: Path,
    shell: Shell,
    edit: Callable[[list[str]], None] = lambda lines: None,
) -> dict[str, str]:
    """Run the README section's ``sh`` block line by line (its ``/tmp/...`` data directory
    moved to ``data_dir``, the lines changed by ``edit``); each line's stdout. The cluster is
    brought down even if a line fails."""
    (block,) = readme_blocks("sh", section)
    readme_dir = re.search(r"--data-dir (/tmp/\w+)", block)
    assert readme_dir is not None, f"{section}: no --data-dir /tmp/... in its block"
    lines = [
        line.replace(readme_dir.group(1), str(data_dir))
        for line in block.splitlines()
        if line.strip()
    ]
    edit(lines)
    outputs: dict[str, str] = {}
    try:
        for line in lines:
            outputs[line] = shell.run(line)
    finally:
        if (data_dir / "cluster.json").exists():
            shell.kraft(["cluster", "down", "--data-dir", str(data_dir)])
    assert not (data_dir / "cluster.json").exists()  # cluster down ran
    return outputs


def _output_of(outputs: dict[str, str], command: str) -> str:
    return next(out for line, out in outputs.items() if command in line)


@pytest.mark.process
@pytest.mark.timeout(240)
def test_readme_security_walk_through_runs_on_a_tls_cluster_with_the_authorizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def check(lines: list[str]) -> None:
        assert any("--tls --authorizer" in line for line in lines)

    outputs = run_walk_through("Security", tmp_path / "kcs", Shell(monkeypatch, capsys), check)
    assert _output_of(outputs, "kraft consume") == "100\n"  # alice's 100 records, read by her
    assert os.environ["KRAFT_SSL_CERTFILE"].endswith("alice.pem")


@pytest.mark.process
@pytest.mark.timeout(300)
def test_readme_cli_walk_through_runs_as_admin_on_a_tls_cluster_with_the_authorizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "A cluster from the command line" exactly as written, on ``cluster up --tls
    --authorizer``: ``kraft cluster env`` gives the admin identity, so every step works."""

    def secure(lines: list[str]) -> None:
        up = next(i for i, line in enumerate(lines) if line.startswith("kraft cluster up"))
        lines[up] = lines[up].replace(" --detach", " --tls --authorizer --detach")

    section = "A cluster from the command line"
    outputs = run_walk_through(section, tmp_path / "kc", Shell(monkeypatch, capsys), secure)
    assert os.environ["KRAFT_SSL_CERTFILE"].endswith("admin.pem")
    consumed = _output_of(outputs, "kraft consume")
    assert consumed.splitlines()[-1].endswith("1000")  # the last of the 1,000 records
    described = _output_of(outputs, "topics describe")
    assert described.count("\tPartition: ") == 6, described  # all 6, each with its leader
    assert "Leader: -1" not in described, described


@pytest.mark.process
@pytest.mark.timeout(240)
def test_readme_kafka_client_reads_from_port_9092_as_a_kafka_user_expects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Kafka user's habit works (issue 30): the walk-through's cluster, on its default ports,
    has the first broker's Kafka listener on 127.0.0.1:9092, and the README's librdkafka block
    reads there what ``kraft produce`` wrote (a 1+1 here, so the topic has RF 1)."""
    section = "A cluster from the command line"
    (block,) = readme_blocks("sh", section)
    lines = [line for line in block.splitlines() if line.strip()]
    last = next(i for i, line in enumerate(lines) if line.startswith("kraft consume"))
    shell, data_dir = Shell(monkeypatch, capsys), tmp_path / "kc"
    small = {"--controllers 3 --brokers 3": "--controllers 1 --brokers 1", "/tmp/kc": str(data_dir)}
    small |= {
        "--replication-factor 3": "--replication-factor 1",
        "insync.replicas=2": "insync.replicas=1",
    }
    try:
        for line in lines[: last + 1]:
            for old, new in small.items():
                line = line.replace(old, new)
            shell.run(line)
        assert os.environ["KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:9092"
        (example,) = [b for b in readme_blocks("python", section) if "confluent_kafka" in b]
        result = subprocess.run(
            [sys.executable, "-c", example], capture_output=True, text=True, timeout=120
        )
    finally:
        shell.kraft(["cluster", "down", "--data-dir", str(data_dir)])
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"b'\d+'\n", result.stdout), result.stdout  # one of the lines produced
