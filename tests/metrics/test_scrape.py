"""Reading a node's endpoint back (`kraft.metrics.scrape`), over canned exposition texts of
the shape a broker and the active controller serve."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator

import pytest

from kraft.metrics.scrape import MetricsWatch, Scrape, messages_in_rate, node_view, parse

BROKER_TEXT = """\
# HELP kafka_server_replicamanager_underreplicatedpartitions partitions ...
# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
kafka_server_replicamanager_underreplicatedpartitions 2.0
# HELP kafka_server_replicamanager_underminisrpartitioncount partitions ...
# TYPE kafka_server_replicamanager_underminisrpartitioncount gauge
kafka_server_replicamanager_underminisrpartitioncount 1.0
# HELP kafka_server_replicamanager_leadercount partitions this broker leads
# TYPE kafka_server_replicamanager_leadercount gauge
kafka_server_replicamanager_leadercount 4.0
# HELP kafka_server_replicamanager_partitioncount partitions this broker holds
# TYPE kafka_server_replicamanager_partitioncount gauge
kafka_server_replicamanager_partitioncount 12.0
# HELP kafka_server_brokertopicmetrics_messagesin_total records acknowledged, per topic
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 1500.0
kafka_server_brokertopicmetrics_messagesin_total{topic="clicks"} 500.0
kafka_server_brokertopicmetrics_messagesin_created{topic="orders"} 1.7e+09
kafka_server_brokertopicmetrics_messagesin_created{topic="clicks"} 1.7e+09
# HELP kafka_network_requestmetrics_totaltime_seconds time from arrival to answer
# TYPE kafka_network_requestmetrics_totaltime_seconds histogram
kafka_network_requestmetrics_totaltime_seconds_bucket{le="0.001",request="Produce"} 3.0
kafka_network_requestmetrics_totaltime_seconds_bucket{le="+Inf",request="Produce"} 5.0
kafka_network_requestmetrics_totaltime_seconds_count{request="Produce"} 5.0
kafka_network_requestmetrics_totaltime_seconds_sum{request="Produce"} 0.01
"""

ACTIVE_CONTROLLER_TEXT = """\
# TYPE kafka_controller_kafkacontroller_activecontrollercount gauge
kafka_controller_kafkacontroller_activecontrollercount 1.0
# TYPE kafka_controller_kafkacontroller_offlinepartitionscount gauge
kafka_controller_kafkacontroller_offlinepartitionscount 3.0
# TYPE kafka_controller_kafkacontroller_fencedbrokercount gauge
kafka_controller_kafkacontroller_fencedbrokercount 1.0
# TYPE kafka_controller_kafkacontroller_activebrokercount gauge
kafka_controller_kafkacontroller_activebrokercount 2.0
"""


def test_parse_sums_a_metric_over_its_label_sets() -> None:
    values = parse(BROKER_TEXT)
    assert values["kafka_server_brokertopicmetrics_messagesin_total"] == 2000.0
    assert values["kafka_server_replicamanager_underreplicatedpartitions"] == 2.0
    assert values["kafka_network_requestmetrics_totaltime_seconds_count"] == 5.0


def test_a_brokers_view_has_its_partition_figures_and_the_messages_in_rate() -> None:
    before = Scrape(10.0, parse(BROKER_TEXT))
    after = Scrape(12.0, parse(BROKER_TEXT.replace("} 1500.0", "} 2500.0")))
    view = node_view("broker", after, before)
    assert view == {
        "under_replicated": 2,
        "under_min_isr": 1,
        "leader_count": 4,
        "partition_count": 12,
        "messages_in_per_s": 500.0,
    }
    assert node_view("broker", after)["messages_in_per_s"] is None  # one scrape: no rate


def test_a_counter_that_went_back_gives_no_rate_a_missing_counter_gives_zero() -> None:
    high = Scrape(1.0, parse(BROKER_TEXT))
    restarted = Scrape(2.0, parse(BROKER_TEXT.replace("} 1500.0", "} 1.0")))
    assert messages_in_rate(high, restarted) is None
    assert messages_in_rate(high, Scrape(2.0, {})) == 0.0


def test_the_active_controllers_view_and_a_standbys() -> None:
    active = node_view("controller", Scrape(1.0, parse(ACTIVE_CONTROLLER_TEXT)))
    assert active == {
        "active": 1,
        "offline_partitions": 3,
        "fenced_brokers": 1,
        "active_brokers": 2,
    }
    standby_text = "# TYPE kafka_controller_kafkacontroller_activecontrollercount gauge\n"
    standby_text += "kafka_controller_kafkacontroller_activecontrollercount 0.0\n"
    standby = node_view("controller", Scrape(1.0, parse(standby_text)))
    assert standby == {
        "active": 0,
        "offline_partitions": None,
        "fenced_brokers": None,
        "active_brokers": None,
    }


def test_parse_refuses_text_that_is_not_an_exposition() -> None:
    with pytest.raises(ValueError):
        parse("<html>not metrics</html>\n")


@contextlib.contextmanager
def canned_endpoint(text: str) -> Iterator[tuple[str, dict[str, str]]]:
    """A tiny HTTP server answering ``page["text"]`` (canned, no node): its URL and page."""
    page = {"text": text}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page["text"].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/metrics", page
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def endpoint() -> Iterator[tuple[str, dict[str, str]]]:
    with canned_endpoint(BROKER_TEXT) as served:
        yield served


def test_the_watch_rates_against_its_last_scrape_and_names_a_node_that_does_not_answer(
    endpoint: tuple[str, dict[str, str]],
) -> None:
    url, page = endpoint
    watch = MetricsWatch(timeout=2.0)
    # NB: port 1 on loopback: nothing listens, the connection is refused at once.
    urls = {"broker-101": ("broker", url), "broker-102": ("broker", "http://127.0.0.1:1/m")}
    first = watch.refresh(urls)
    assert first["broker-101"]["leader_count"] == 4
    assert first["broker-101"]["messages_in_per_s"] is None
    assert "error" in first["broker-102"]
    page["text"] = BROKER_TEXT.replace("} 1500.0", "} 2500.0")
    second = watch.refresh(urls)
    rate = second["broker-101"]["messages_in_per_s"]
    assert rate is not None and rate > 0
    page["text"] = "garbage {\n"
    assert "error" in watch.refresh(urls)["broker-101"]
