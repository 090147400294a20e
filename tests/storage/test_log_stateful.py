"""A hypothesis state machine against `SegmentedLog`: random appends, rolls, retention,
truncation, flushes, clean restarts and crashes that tear (and garble) the unflushed end of the
active segment. After every step the log must equal the model: offsets contiguous, every
flushed batch present, no corrupt batch readable, indexes pointing at batch starts."""

from __future__ import annotations

import itertools
import os
import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from storage.config import LogConfig
from storage.log import SegmentedLog
from storage.records import build_batch, set_base_offset, set_partition_leader_epoch
from storage.segment import segment_file_name
from tests.storage.test_log_builders import (
    FakeClock,
    assert_indexes_agree_with_scan,
    read_all,
    scan_segment_file,
)

CONFIG = LogConfig(
    segment_bytes=4000,
    segment_ms=50_000,
    index_interval_bytes=256,
    retention_bytes=9000,
    retention_ms=-1,
)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # tmpfs when there is one: the machine checks logic, and fsync there costs nothing.
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.directory = Path(tempfile.mkdtemp(prefix="kraft-log-", dir=shm))
        self.clock = FakeClock()
        self.log = SegmentedLog.open(self.directory, CONFIG, self.clock)
        self.batches: list[tuple[int, int, int, bytes]] = []  # base, next, epoch, bytes
        self.log_start_offset = 0
        self.flushed = 0
        self.epoch = 0

    def teardown(self) -> None:
        self.log.abandon()
        shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def end(self) -> int:
        return self.batches[-1][1] if self.batches else self.log.log_end_offset

    # --- rules --------------------------------------------------------------------------------

    @rule(
        shapes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 200)), min_size=1, max_size=3),
        stamp=st.booleans(),
        new_epoch=st.booleans(),
    )
    def append(self, shapes: list[tuple[int, int]], stamp: bool, new_epoch: bool) -> None:
        if new_epoch:
            self.epoch += 1
        raw = [
            build_batch([bytes([65 + i % 26]) * size] * count, timestamp_ms=self.clock.now_ms)
            for i, (count, size) in enumerate(shapes)
        ]
        first = self.log.append(b"".join(raw), leader_epoch=self.epoch if stamp else None)
        assert first == self.log.log_end_offset - sum(c for c, _ in shapes)
        offset = first
        for batch, (count, _) in zip(raw, shapes, strict=True):
            stored = bytearray(batch)
            set_base_offset(stored, offset)
            if stamp:
                set_partition_leader_epoch(stored, self.epoch)
            self.batches.append(
                (offset, offset + count, self.epoch if stamp else -1, bytes(stored))
            )
            offset += count

    @rule()
    def flush(self) -> None:
        self.log.flush()
        self.flushed = self.log.log_end_offset
        assert self.log.recovery_point == self.flushed

    @rule(ms=st.integers(1, 60_000))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def apply_retention(self) -> None:
        self.log.apply_retention()
        self._forget_below(self.log.log_start_offset)

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start_offset, self.end))
        self.log.truncate_to(offset)
        self.batches = [b for b in self.batches if b[1] <= offset]
        expected_end = self.batches[-1][1] if self.batches else self.log.log_end_offset
        assert self.log.log_end_offset == expected_end
        self.flushed = min(self.flushed, expected_end)

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def advance_log_start_offset(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start_offset, self.end))
        self.log.advance_log_start_offset(offset)
        self._forget_below(offset)

    @rule()
    def restart_cleanly(self) -> None:
        self.log.close()
        self.log = SegmentedLog.open(self.directory, CONFIG, self.clock)
        assert self.log.had_clean_shutdown
        self.flushed = self.log.log_end_offset

    @rule(seed=st.integers(0, 2**32 - 1), garble=st.booleans())
    def crash(self, seed: int, garble: bool) -> None:
        rng = random.Random(seed)
        active = self.log.segments[-1]
        path = self.directory / segment_file_name(active.base_offset)
        self.log.abandon()
        batches = scan_segment_file(path)
        size = path.stat().st_size
        floor = next((p for p, h in batches if h.base_offset >= self.flushed), size)
        if active.base_offset > self.flushed:
            floor = 0
        length = rng.randint(floor, size)
        with open(path, "r+b") as f:
            if garble and length > floor:
                pos = rng.randrange(floor, length)
                start = max(p for p, _ in batches if p <= pos) if batches else 0
                if 12 <= pos - start < 16:  # the leader epoch is outside the CRC, as in Kafka
                    pos = start + 16
                if pos < length:
                    f.seek(pos)
                    byte = f.read(1)[0]
                    f.seek(pos)
                    f.write(bytes([byte ^ rng.randint(1, 255)]))
        os.truncate(path, length)

        self.log = SegmentedLog.open(self.directory, CONFIG, self.clock)
        assert not self.log.had_clean_shutdown
        assert self.log.log_start_offset == self.log_start_offset
        survivors = read_all(self.log)
        expected = [b for b in self.batches if b[1] > self.log_start_offset]
        assert [b for _, b in survivors] == [b[3] for b in expected[: len(survivors)]]
        self.batches = expected[: len(survivors)]
        if self.flushed > self.log_start_offset:
            assert self.log.log_end_offset >= self.flushed, "a flushed batch was lost"

    def _forget_below(self, offset: int) -> None:
        self.log_start_offset = max(self.log_start_offset, offset)
        assert self.log.log_start_offset == self.log_start_offset
        self.batches = [b for b in self.batches if b[1] > self.log_start_offset]

    # --- invariants ---------------------------------------------------------------------------

    @invariant()
    def log_matches_the_model(self) -> None:
        log = self.log
        assert log.log_start_offset == self.log_start_offset
        if self.batches:
            assert log.log_end_offset == self.batches[-1][1]
        read = read_all(log)
        assert [b for _, b in read] == [b[3] for b in self.batches]
        for previous, current in itertools.pairwise(read):
            assert previous[0].next_offset == current[0].base_offset

    @invariant()
    def indexes_and_epochs_agree_with_the_batches(self) -> None:
        assert_indexes_agree_with_scan(self.log)
        segments = self.log.segments
        for a, b in itertools.pairwise(segments):
            assert a.next_offset == b.base_offset
        cache = self.log.leader_epoch_cache
        for base, _next, epoch, _ in self.batches:
            if epoch >= 0 and base >= self.log_start_offset:
                assert cache.epoch_for_offset(base) == epoch


LogMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("KRAFT_LOG_EXAMPLES", "60")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogMachine = LogMachine.TestCase
