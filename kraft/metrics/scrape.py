"""Reading the nodes' metrics endpoints back, for ``kraft cluster status`` and the live view of
``kraft cluster up``: what each node says of itself, in a few numbers.

`parse` turns one exposition text (Prometheus's text format, parsed by `prometheus_client`)
into ``{sample name: value}`` summed over label sets (``messagesin_total`` over topics);
`node_view` picks a node's figures from it, and the messages-in rate against the node's
previous scrape; `MetricsWatch` scrapes every endpoint at once and keeps the last scrape of
each for the next rate. A node that does not answer has an ``error`` and no figures: a scrape
never fails the status.
"""

from __future__ import annotations

import http.client
import time
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client.parser import text_string_to_metric_families

from kraft.metrics.kafka import (
    ACTIVE_BROKERS,
    ACTIVE_CONTROLLER,
    FENCED_BROKERS,
    LEADER_COUNT,
    MESSAGES_IN,
    OFFLINE_PARTITIONS,
    PARTITION_COUNT,
    UNDER_MIN_ISR,
    UNDER_REPLICATED,
)

BROKER_FIGURES: Final = {
    "under_replicated": UNDER_REPLICATED,
    "under_min_isr": UNDER_MIN_ISR,
    "leader_count": LEADER_COUNT,
    "partition_count": PARTITION_COUNT,
}
CONTROLLER_FIGURES: Final = {
    "active": ACTIVE_CONTROLLER,
    "offline_partitions": OFFLINE_PARTITIONS,
    "fenced_brokers": FENCED_BROKERS,
    "active_brokers": ACTIVE_BROKERS,
}
"""The view's key -> the metric; the last three only on the active controller."""
_MAX_BYTES = 4 << 20
"""An endpoint's answer read at most (a node's is some KB; a stranger's port may be anything)."""


@dataclass(frozen=True, slots=True)
class Scrape:
    """One endpoint's samples at ``at`` (a monotonic time, seconds)."""

    at: float
    values: Mapping[str, float]


def parse(text: str) -> dict[str, float]:
    """``{sample name: value}`` of an exposition text, each summed over its label sets.

    Raises:
        ValueError: not Prometheus's text format.
    """
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


def scrape(url: str, timeout: float = 1.0) -> Scrape:
    """Raises: OSError: no answer; http.client.HTTPException: a broken answer; ValueError:
    not an exposition text."""
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        text = reply.read(_MAX_BYTES).decode("utf-8", errors="replace")
    return Scrape(time.monotonic(), parse(text))


def node_view(role: str, now: Scrape, previous: Scrape | None = None) -> dict[str, Any]:
    """A node's figures (`BROKER_FIGURES` or `CONTROLLER_FIGURES` keys, a figure the node does
    not export is None) and, for a broker scraped before, ``messages_in_per_s`` since then."""
    figures = BROKER_FIGURES if role == "broker" else CONTROLLER_FIGURES
    view: dict[str, Any] = {
        key: int(now.values[name]) if name in now.values else None for key, name in figures.items()
    }
    if role == "broker":
        view["messages_in_per_s"] = messages_in_rate(previous, now)
    return view


def messages_in_rate(before: Scrape | None, after: Scrape) -> float | None:
    """Records acknowledged per second between two scrapes of one broker (None: no earlier
    scrape, or the counter went back: the broker restarted in between)."""
    if before is None or after.at <= before.at:
        return None
    total = MESSAGES_IN  # the counter's sample carries the _total name
    if total not in after.values:
        return 0.0
    delta = after.values[total] - before.values.get(total, 0.0)
    if delta < 0:
        return None
    return round(delta / (after.at - before.at), 1)


class MetricsWatch:
    """Scrapes a set of endpoints, all at once, and keeps each one's last scrape (the rate of
    the next one is measured against it)."""

    def __init__(self, timeout: float = 1.0) -> None:
        self._timeout = timeout
        self._last: dict[str, Scrape] = {}

    def refresh(self, urls: Mapping[str, tuple[str, str]]) -> dict[str, dict[str, Any]]:
        """``{key: (role, url)}`` -> ``{key: view}``; a node that did not answer has
        ``{"error": why}``."""
        if not urls:
            return {}

        def one(url: str) -> Scrape | str:
            try:
                return scrape(url, self._timeout)
            except (OSError, ValueError, http.client.HTTPException) as e:
                return f"{type(e).__name__}: {str(e)[:120]}"

        with ThreadPoolExecutor(max_workers=min(len(urls), 16)) as pool:
            results = dict(zip(urls, pool.map(one, [url for _, url in urls.values()]), strict=True))
        views: dict[str, dict[str, Any]] = {}
        for key, result in results.items():
            if isinstance(result, str):
                views[key] = {"error": result}
                self._last.pop(key, None)
                continue
            views[key] = node_view(urls[key][0], result, self._last.get(key))
            self._last[key] = result
        return views

    def age(self) -> float | None:
        """Seconds since the oldest kept scrape (None: none kept)."""
        if not self._last:
            return None
        return time.monotonic() - min(s.at for s in self._last.values())


__all__ = [
    "BROKER_FIGURES",
    "CONTROLLER_FIGURES",
    "MetricsWatch",
    "Scrape",
    "messages_in_rate",
    "node_view",
    "parse",
    "scrape",
]
