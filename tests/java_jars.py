"""The fetched jars for the tests that run Kafka's Java client and tools, or Spark's Kafka source,
against kraft (``tests/kafka_java``, ``tests/spark/test_kafka_source.py``).

A fresh machine lacks them: the first test that asks fetches the set once (``kraft peer kafka
fetch`` does the same ahead of time; ``make test`` runs it, as ``make jars``, first), bounded by
`JARS_FETCH_TIMEOUT_S` so that a slow registry costs the suite minutes, not its whole budget.
Without Java, Maven or the registry the tests skip, and the reason names the command to run.
"""

from __future__ import annotations

import functools

from kraft.peer.jars import JarSet, PeerToolError, fetch, find_java

JARS_FETCH_TIMEOUT_S = 240.0
"""A fresh fetch from Maven Central took 25 s (Kafka's 92 jars) and 4 s (Spark's 4) here."""


@functools.cache
def jars_unavailable(jar_set: JarSet) -> str | None:
    """Why ``jar_set`` cannot be used here (None: it can), fetching it once if it is missing."""
    try:
        find_java()
        fetch(jar_set, timeout=JARS_FETCH_TIMEOUT_S)
    except PeerToolError as e:
        return f"{e} (fetch ahead with: kraft peer kafka fetch)"
    return None
