"""A Spark batch job over a kraft topic: page views per country, with the ``kraft`` data source.

Run it with no arguments (needs pyspark, pyarrow and Java 17):

    python examples/spark_batch_job.py [--records 20000] [--master local[2]]

It starts a local cluster (1 controller, 3 brokers), creates a topic of 4 partitions, produces
page-view events (key: user id, value: JSON) with acks=all, then reads the topic with
``spark.read.format("kraft")`` exactly as Spark's Kafka source would be read, and shows an
aggregate: views and distinct users per country. It checks the totals against what it produced
and prints ``OK`` at the end. With ``--master spark://host:port`` the same job runs on a
standalone cluster.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

COUNTRIES = ["BR", "DE", "FR", "IN", "JP", "US"]
TOPIC = "page-views"


def produce_events(bootstrap: str, count: int) -> dict[str, int]:
    """``count`` page views; returns the views per country it produced."""
    from kraft import AdminClient, Producer

    with AdminClient(bootstrap) as admin:
        admin.create_topic(TOPIC, partitions=4, replication_factor=3)
        admin.wait_for_leaders(TOPIC)
    rng = random.Random(42)
    expected: dict[str, int] = {}
    with Producer(bootstrap, acks="all") as producer:
        for i in range(count):
            country = rng.choice(COUNTRIES)
            user = f"user-{rng.randrange(1000)}"
            event = {"user": user, "country": country, "page": f"/p/{i % 50}"}
            producer.send(TOPIC, key=user.encode(), value=json.dumps(event).encode())
            expected[country] = expected.get(country, 0) + 1
        producer.flush()
    return expected


def views_per_country(session: Any, bootstrap: str) -> dict[str, int]:
    """The job: read the whole topic with the ``kraft`` source, show views and distinct users
    per country, and return the views per country."""
    from pyspark.sql import functions as F

    views = (
        session.read.format("kraft")
        .option("kraft.bootstrap", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    events = views.select(
        F.col("partition"),
        F.col("offset"),
        F.get_json_object(F.col("value").cast("string"), "$.country").alias("country"),
        F.col("key").cast("string").alias("user"),
    )
    per_country = (
        events.groupBy("country")
        .agg(F.count("*").alias("views"), F.countDistinct("user").alias("users"))
        .orderBy(F.desc("views"))
    )
    per_country.show()
    return {r["country"]: r["views"] for r in per_country.collect()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    from kraft import LocalCluster

    with LocalCluster(controllers=1, brokers=3) as cluster:
        cluster.wait_until_healthy(timeout=60)
        print(f"cluster up: brokers {cluster.bootstrap}")
        expected = produce_events(cluster.bootstrap, args.records)
        print(f"produced {args.records} page views to {TOPIC!r}")

        import spark as kraft_spark

        started = time.monotonic()
        session = kraft_spark.local_session(args.master, "kraft-spark-batch-job")
        try:
            got = views_per_country(session, cluster.bootstrap)
            print(f"Spark job took {time.monotonic() - started:.1f} s (session start included)")
        finally:
            kraft_spark.stop_session(session)
    if got != expected:
        print(f"MISMATCH: Spark counted {got}, produced {expected}")
        return 1
    print(f"OK: Spark counted all {args.records} page views per country, as produced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
