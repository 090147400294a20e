"""`kraft dump-log` and the storage demo, driven as a user would (subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from storage.config import LogConfig
from storage.log import SegmentedLog
from storage.records import SimpleRecord, build_batch


def kraft(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True, timeout=60
    )


def _log_with_torn_tail(directory: Path) -> Path:
    log = SegmentedLog.open(directory, LogConfig())
    log.append(
        build_batch([SimpleRecord(key=b"k", value=b"hello")], timestamp_ms=7), leader_epoch=3
    )
    log.append(build_batch([b"a", b"b"], timestamp_ms=8), leader_epoch=3)
    log.close()
    segment = next(directory.glob("*.log"))
    with segment.open("ab") as f:
        f.write(build_batch([b"torn"], timestamp_ms=9)[:40])
    return segment


def test_dump_log_prints_batches_records_and_a_torn_tail(tmp_path: Path) -> None:
    segment = _log_with_torn_tail(tmp_path)
    out = kraft("dump-log", str(segment), "--records")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"Dumping {segment}"
    assert "baseOffset: 0 lastOffset: 0 count: 1" in lines[1]
    assert "partitionLeaderEpoch: 3" in lines[1] and "isvalid: true" in lines[1]
    assert "| offset: 0 CreateTime: 7 key: k value: hello" in lines[2]
    assert "baseOffset: 1 lastOffset: 2 count: 2" in lines[3]
    assert "40 bytes at position" in lines[-1] and "torn" in lines[-1]


def test_dump_log_json_is_one_object_per_batch(tmp_path: Path) -> None:
    _log_with_torn_tail(tmp_path)
    out = kraft("dump-log", str(tmp_path), "--json")
    objects = [json.loads(line) for line in out.stdout.splitlines()]
    batches = [o for o in objects if "base_offset" in o]
    assert [(b["base_offset"], b["last_offset"], b["crc_valid"]) for b in batches] == [
        (0, 0, True),
        (1, 2, True),
    ]
    assert objects[-1]["tail_problem"] == "torn header" and objects[-1]["size"] == 40


def test_dump_log_of_a_missing_path_fails_with_one_line(tmp_path: Path) -> None:
    out = kraft("dump-log", str(tmp_path / "nope"))
    assert out.returncode != 0
    assert out.stderr.strip().count("\n") == 0 and "no such file" in out.stderr


def test_dump_log_of_a_file_that_is_not_a_segment_fails_with_one_line(tmp_path: Path) -> None:
    """Not "a torn tail, exit 0": a file with another name, or one named like a segment
    that does not start with a v2 batch, is refused."""
    text = tmp_path / "notes.log"
    text.write_text("hello\n")
    named_like_one = tmp_path / "00000000000000000000.log"
    named_like_one.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n" * 4)
    for path, why in ((text, "name"), (named_like_one, "v2 record batch")):
        out = kraft("dump-log", str(path))
        assert out.returncode == 1 and out.stdout == ""
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "is not a kraft/Kafka log segment" in lines[0], out.stderr
        assert str(path) in lines[0] and why in lines[0]
    out = kraft("dump-log", str(tmp_path))  # the directory holds the bad segment too
    assert out.returncode == 1 and str(named_like_one) in out.stderr


def test_dump_log_of_a_segment_whose_first_batch_is_torn_reports_the_torn_tail(
    tmp_path: Path,
) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(build_batch([b"torn"], timestamp_ms=9)[:40])  # magic byte intact
    out = kraft("dump-log", str(segment))
    assert out.returncode == 0, out.stderr
    assert "40 bytes at position 0" in out.stdout and "torn" in out.stdout


def test_dump_log_of_a_directory_skips_log_files_that_are_not_segments(tmp_path: Path) -> None:
    segment = _log_with_torn_tail(tmp_path / "events-0")
    (tmp_path / "broker-101.log").write_text('{"event": "broker_started"}\n')
    out = kraft("dump-log", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert [line for line in out.stdout.splitlines() if line.startswith("Dumping")] == [
        f"Dumping {segment}"
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    out = kraft("dump-log", str(empty))
    assert out.returncode == 1 and "no segment files" in out.stderr


def test_storage_demo_loses_no_flushed_record(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kraft.demo",
            "--storage",
            "--records",
            "60000",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "killed the writer with SIGKILL" in out.stdout
    assert "lost flushed records: 0" in out.stdout
