"""``kraft produce TOPIC``: one record per line of stdin, like ``kafka-console-producer``."""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from typing import TYPE_CHECKING, Any

from kraft.arguments import non_negative_int, positive_seconds
from kraft.cli._connect import add_bootstrap_arguments, broker_bootstrap, parse_key_values
from kraft.cli.console_format import LineReader

if TYPE_CHECKING:
    from replication.clients import RecordFuture

_EPILOG = """\
examples:
  printf 'hello\\nworld\\n' | kraft produce events --bootstrap 127.0.0.1:9192
  printf 'user-1:clicked\\nuser-2:left\\n' | kraft produce events --key-separator :
  printf 'src:web,v:2\\tuser-1\\tclicked\\n' | kraft produce events \\
      --property parse.headers=true --property parse.key=true
  printf '1700000000000|late\\n' | kraft produce events \\
      --property parse.timestamp=true --property timestamp.separator='|'
  seq 1000 | kraft produce events --acks 1 --partition 0 --json

Each line of stdin (without its newline) is one record's value; with --key-separator the
text before the first separator is the key (records with one key go to one partition).
--property takes the console producer's properties (Kafka's names): parse.key,
key.separator, parse.headers, headers.delimiter, headers.separator, headers.key.separator,
null.marker, and kraft's parse.timestamp and timestamp.separator (a line is
[TIMESTAMP<sep>][HEADERS<delim>][KEY<sep>]VALUE).
Records are sent as they are read (linger.ms=5), so typing works too; the command exits 0
once every record is acknowledged, or 1 with the first failure. --acks all (the default)
uses the idempotent producer (KIP-98: no duplicates when a retry races an ack).
"""

_METADATA_TIMEOUT_S = 10.0
"""How long to look for the topic before "cluster unreachable" / "unknown topic"."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "produce",
        help="send stdin lines as records (kafka-console-producer)",
        description="Produce one record per line of stdin.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic")
    add_bootstrap_arguments(p, controller=False)
    p.add_argument(
        "--key-separator",
        metavar="SEP",
        help="split each line at the first SEP into key and value",
    )
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a line-reader property (repeatable), e.g. parse.key=true or parse.headers=true",
    )
    p.add_argument(
        "--acks", choices=("all", "-1", "1", "0"), default="all", help="acks (default all)"
    )
    p.add_argument("--partition", type=non_negative_int, help="send every record to this partition")
    p.add_argument(
        "--idempotence",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="enable.idempotence (default: on with --acks all, off otherwise)",
    )
    p.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any producer config (repeatable), e.g. linger.ms=20 or compression.type=lz4",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="delivery.timeout.ms for each record, in seconds (default 30)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print each record's partition and offset, one JSON object per line",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kraft.cli._connect import describe_topic_on_brokers, security
    from replication.clients import Producer

    bootstrap = broker_bootstrap(args)
    options: dict[str, Any] = {
        "acks": args.acks,
        "enable_idempotence": (
            args.acks in ("all", "-1") if args.idempotence is None else args.idempotence
        ),
        "delivery_timeout_ms": int(args.timeout * 1000),
        "request_timeout_ms": int(min(args.timeout, 30.0) * 1000),
        "max_block_ms": int(args.timeout * 1000),
        **parse_key_values(args.producer_property, "--producer-property"),
    }
    properties = parse_key_values(args.property, "--property")
    if args.key_separator is not None:
        properties = {"parse.key": "true", "key.separator": args.key_separator, **properties}
    reader = LineReader.from_properties(properties)
    metadata_timeout = min(args.timeout, _METADATA_TIMEOUT_S)
    topic = describe_topic_on_brokers(bootstrap, args.topic, metadata_timeout, "produce")
    count = len(topic.partitions)
    if args.partition is not None and not 0 <= args.partition < count:
        raise ValueError(
            f"--partition {args.partition}: {args.topic} has partitions 0..{count - 1}"
        )

    producer = Producer(bootstrap, **{**security(), **options})
    pending: deque[tuple[int, RecordFuture]] = deque()
    sent = 0
    try:
        for number, raw in enumerate(sys.stdin.buffer, start=1):
            line = reader.parse(raw.rstrip(b"\n").rstrip(b"\r"), number)
            future = producer.send(
                args.topic,
                line.value,
                line.key,
                args.partition,
                headers=list(line.headers) or None,
                timestamp_ms=line.timestamp_ms,
            )
            pending.append((number, future))
            sent += 1
            while pending and pending[0][1].done():
                _report(*pending.popleft(), as_json=args.json)
        producer.flush(timeout=args.timeout + 5)
        while pending:
            _report(*pending.popleft(), as_json=args.json)
    finally:
        producer.close(timeout=0 if pending else None)
    print(f"kraft: produced {sent} records to {args.topic}", file=sys.stderr)
    return 0


def _report(number: int, future: RecordFuture, *, as_json: bool) -> None:
    """Print one acknowledged record (with ``--json``), or raise its failure."""
    from storage.errors import KraftError

    try:
        metadata = future.result(timeout=0)
    except KraftError as e:
        e.message = f"line {number} was not acknowledged: {e.message}"
        raise
    if as_json:
        print(
            json.dumps({"line": number, "partition": metadata.partition, "offset": metadata.offset})
        )
