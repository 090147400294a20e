"""``kraft bench spark``: Spark reading a topic through the ``kraft`` data source, beside Spark
reading the same records from a local Parquet file and a JSON-lines file, in the same run.

Setup (not timed): a `LocalCluster` (1 controller, 3 brokers), a topic of 6 partitions, RF=3,
N records of ``--record-size`` bytes (printable, so JSON holds them as they are) produced with
acks=all; the same records (key, value, topic, partition, offset, timestamp) written to a
Parquet file and a JSON-lines file with pyarrow; one SparkSession (``--master``, local[2] by
default) and an untimed warm-up on each source: ``limit(10)``, then one of each timed query
(the first Python data source query pays for starting Python workers: 15-22 s in
docs/benchmarks.md; without the warm-up the first timed round ran 2-3x slower for every source).

Timed, for each source: ``load().count()``, a scan of the values
(``selectExpr("sum(length(value))")``) and ``load().write.parquet(tmp)``, in ``--rounds``
rounds that interleave the sources (so a burst of load from elsewhere hits all of them), the
median reported; rows/s and MB/s (MB of record values, 10**6 bytes). The ratios kraft /
JSON-lines and kraft / Parquet are the figures to watch: the target is to read at least as
fast as Spark reads JSON lines.
Also timed: ``count()`` of the kraft source read with a schema of one header column
(``.schema("offset bigint")``), which decodes no record (`spark.source`).
# NB: count() needs no column: Parquet answers from its footers and Spark does not parse JSON
# lines for it, while a Python data source has no column pruning (pyspark 4.3) and decodes
# every column it declares; the scan and write.parquet read the values in every source.

    kraft bench spark --records 1000000 --json
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from kraft.arguments import ArgumentParser, positive_int

PARTITIONS = 6
REPLICATION_FACTOR = 3
TOPIC = "bench-spark"


def _spark() -> Any:
    """The ``spark`` package, imported lazily: kraft sits below it in the layering, and only
    commands (this benchmark, the CLI, the demo) reach up to it."""
    import spark

    return spark


def _values(count: int, size: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    alphabet = (string.ascii_letters + string.digits).encode()
    pool = [bytes(rng.choice(alphabet) for _ in range(size)) for _ in range(256)]
    return [b"%08d" % i + pool[i % 256][8:] if size >= 8 else pool[i % 256] for i in range(count)]


def _produce(bootstrap: str, values: list[bytes]) -> None:
    from kraft import AdminClient, Producer

    with AdminClient(bootstrap) as admin:
        admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=REPLICATION_FACTOR)
        admin.wait_for_leaders(TOPIC)
    with Producer(bootstrap, acks="all", linger_ms=20, batch_size=256 << 10) as producer:
        window = []
        for i, value in enumerate(values):
            window.append(producer.send(TOPIC, value=value, partition=i % PARTITIONS))
            if len(window) >= 50_000:
                window[-1].result(timeout=60)
                window = [f for f in window if not f.done()]
        producer.flush()
        for f in window:
            f.result(timeout=60)


def _write_files(bootstrap: str, directory: Path) -> tuple[str, str]:
    """The topic's records as a Parquet file and a JSON-lines file (values as strings)."""
    import pyarrow.parquet as pq

    kraft_spark = _spark()
    options = kraft_spark.ReadOptions.parse({"kraft.bootstrap": bootstrap, "subscribe": TOPIC})
    with kraft_spark.OffsetLookup(bootstrap) as lookup:
        ranges = kraft_spark.plan_ranges(options, lookup)
    parquet_path = directory / "records.parquet"
    json_path = directory / "records.jsonl"
    writer = None
    with open(json_path, "w") as out, kraft_spark.RangeFetcher(bootstrap) as fetcher:
        for r in ranges:
            for batch in fetcher.arrow_batches(r, include_headers=False):
                if writer is None:
                    writer = pq.ParquetWriter(parquet_path, batch.schema)
                writer.write_batch(batch)
                for row in batch.to_pylist():
                    row["key"] = None if row["key"] is None else row["key"].decode()
                    row["value"] = row["value"].decode()
                    row["timestamp"] = row["timestamp"].isoformat()
                    out.write(json.dumps(row) + "\n")
    assert writer is not None
    writer.close()
    return str(parquet_path), str(json_path)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def produce(bootstrap: str, records: int, record_size: int) -> float:
    """Create `TOPIC` and produce the ``records`` values into it (acks=all); the seconds."""
    produce_s, _ = _timed(lambda: _produce(bootstrap, _values(records, record_size)))
    return produce_s


def measure(
    session: Any,
    bootstrap: str,
    directory: Path,
    records: int,
    record_size: int,
    rounds: int = 3,
    *,
    warm_up: bool = True,
) -> dict[str, Any]:
    """With the records in `TOPIC` on ``bootstrap`` (`produce`): write them as a Parquet and
    a JSON-lines file into ``directory``, time each source with ``session`` and return the
    figures (the module docstring says what is timed). ``warm_up=False`` skips the untimed
    warm-up queries: the figures are then present but not comparable (the smoke test, on the
    Spark tests' shared session)."""
    result: dict[str, Any] = {}
    parquet, jsonl = _write_files(bootstrap, directory)
    sources: dict[str, Callable[[], Any]] = {
        "kraft": lambda: (
            session.read.format("kraft")
            .option("kraft.bootstrap", bootstrap)
            .option("subscribe", TOPIC)
            .load()
        ),
        "parquet": lambda: session.read.parquet(parquet),
        "jsonl": lambda: session.read.schema(
            "key string, value string, topic string, partition int, offset bigint, "
            "timestamp timestamp, timestampType int"
        ).json(jsonl),
    }
    # count() of a schema of one header column: no record decoded (spark.source)
    offsets_only = (
        session.read.format("kraft")
        .schema("offset bigint")
        .option("kraft.bootstrap", bootstrap)
        .option("subscribe", TOPIC)
    )
    if warm_up:
        offsets_only.load().count()  # warm-up, untimed
        for name, load in sources.items():
            # Warm-up, untimed, the same for every source: one of each timed query.
            # limit(10) alone started one Python worker, and the first timed round
            # then paid for the other, for the JIT of the write path and more: it
            # ran 2-3x slower than the next rounds, for every source.
            load().limit(10).collect()
            load().count()
            load().selectExpr("sum(length(value)) AS n").collect()
            load().write.mode("overwrite").parquet(str(directory / f"out-{name}"))
    megabytes = records * record_size / 1e6
    times: dict[str, dict[str, list[float]]] = {
        name: {"count": [], "scan": [], "write": []} for name in sources
    }
    offsets_counts: list[float] = []
    for _ in range(rounds):  # interleaved, so a burst of load hits every source
        for name, load in sources.items():
            count_s, count = _timed(load().count)
            assert count == records, f"{name} counted {count} rows, not {records}"
            scan = load().selectExpr("sum(length(value)) AS n")
            scan_s, scanned = _timed(scan.collect)
            assert scanned[0].n == records * record_size, f"{name}: {scanned}"
            times[name]["scan"].append(scan_s)
            writer = load().write.mode("overwrite")
            out = str(directory / f"out-{name}")
            write_s, _ = _timed(partial(writer.parquet, out))
            times[name]["count"].append(count_s)
            times[name]["write"].append(write_s)
            if name == "kraft":
                count_s, count = _timed(offsets_only.load().count)
                assert count == records, f"offsets only: {count} rows, not {records}"
                offsets_counts.append(count_s)
    for name, measured in times.items():
        count_s = statistics.median(measured["count"])
        scan_s = statistics.median(measured["scan"])
        write_s = statistics.median(measured["write"])
        result[name] = {
            "count_s": round(count_s, 3),
            "count_rows_per_s": round(records / count_s),
            "count_mb_per_s": round(megabytes / count_s, 1),
            "scan_s": round(scan_s, 3),
            "scan_rows_per_s": round(records / scan_s),
            "scan_mb_per_s": round(megabytes / scan_s, 1),
            "write_parquet_s": round(write_s, 3),
            "write_parquet_rows_per_s": round(records / write_s),
            "write_parquet_mb_per_s": round(megabytes / write_s, 1),
            "count_s_all": [round(t, 3) for t in measured["count"]],
            "scan_s_all": [round(t, 3) for t in measured["scan"]],
            "write_parquet_s_all": [round(t, 3) for t in measured["write"]],
        }
    count_s = statistics.median(offsets_counts)
    result["kraft"]["count_offset_schema_s"] = round(count_s, 3)
    result["kraft"]["count_offset_schema_rows_per_s"] = round(records / count_s)
    result["kraft"]["count_offset_schema_s_all"] = [round(t, 3) for t in offsets_counts]
    for base in ("jsonl", "parquet"):
        for what in ("count", "scan", "write_parquet"):
            key = f"{what}_rows_per_s"
            result[f"kraft_vs_{base}_{what}"] = round(result["kraft"][key] / result[base][key], 2)
    for base in ("jsonl", "parquet"):
        result[f"kraft_offset_schema_vs_{base}_count"] = round(
            result["kraft"]["count_offset_schema_rows_per_s"] / result[base]["count_rows_per_s"], 2
        )
    return result


def run(
    records: int, record_size: int, master: str, keep_dir: str | None = None, rounds: int = 3
) -> dict[str, Any]:
    """`measure` on a fresh `LocalCluster` (1 controller, 3 brokers) and SparkSession."""
    from kraft.cluster import LocalCluster

    directory = Path(keep_dir or tempfile.mkdtemp(prefix="kraft-bench-spark-"))
    directory.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "records": records,
        "record_size": record_size,
        "master": master,
        "rounds": rounds,
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        with LocalCluster(controllers=1, brokers=3, data_dir=directory / "cluster") as cluster:
            cluster.wait_until_healthy(timeout=60)
            result["produce_s"] = round(produce(cluster.bootstrap, records, record_size), 2)
            session = _spark().local_session(master, "kraft-bench-spark")
            try:
                result |= measure(
                    session, cluster.bootstrap, directory, records, record_size, rounds
                )
            finally:
                _spark().stop_session(session)
    finally:
        if keep_dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return result


def _print(result: dict[str, Any]) -> None:
    n = result["records"]
    print(f"kraft bench spark: {n:,} records of {result['record_size']} B, {result['master']}")
    print(
        f"  (produced in {result['produce_s']} s; medians of {result['rounds']} interleaved "
        f"rounds; load average {result['load_average_before']} before, "
        f"{result['load_average']} after)"
    )
    header = ("source", "count rows/s", "scan rows/s", "MB/s", "write.parquet rows/s")
    print("  {:<10}{:>14}{:>13}{:>7}{:>22}".format(*header))
    for name in ("kraft", "parquet", "jsonl"):
        r = result[name]
        print(
            f"  {name:<10}{r['count_rows_per_s']:>14,}{r['scan_rows_per_s']:>13,}"
            f"{r['scan_mb_per_s']:>7}{r['write_parquet_rows_per_s']:>22,}"
        )
    for base in ("jsonl", "parquet"):
        print(
            f"  kraft / {base}: count x{result[f'kraft_vs_{base}_count']}, "
            f"scan x{result[f'kraft_vs_{base}_scan']}, "
            f"write.parquet x{result[f'kraft_vs_{base}_write_parquet']}"
        )
    print(
        '  kraft, schema "offset bigint": count'
        f" {result['kraft']['count_offset_schema_rows_per_s']:,}"
        f" rows/s: x{result['kraft_offset_schema_vs_jsonl_count']} of jsonl,"
        f" x{result['kraft_offset_schema_vs_parquet_count']} of parquet"
    )
    print(
        "  NB: count() needs no column: Parquet reads only footers and JSON skips parsing, "
        "kraft decodes every record (no column pruning for Python data sources); scan = "
        "sum(length(value)); write.parquet scans every column."
    )


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="kraft bench spark",
        description="Spark reading a topic (format kraft) vs the same records as Parquet and "
        "JSON lines, in the same run.",
    )
    parser.add_argument("--records", type=positive_int, default=1_000_000, help="records to read")
    parser.add_argument(
        "--record-size", type=positive_int, default=100, help="bytes per record value"
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    parser.add_argument("--keep-dir", default=None, help="keep files here (default: temp)")
    parser.add_argument(
        "--rounds", type=positive_int, default=3, help="timed rounds (median reported)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = run(args.records, args.record_size, args.master, args.keep_dir, args.rounds)
    if args.json:
        print(json.dumps(result))
    else:
        _print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
