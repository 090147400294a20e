"""``kraft consume TOPIC...``: print records to stdout, like ``kafka-console-consumer``."""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import TYPE_CHECKING, Any

from kraft.arguments import non_negative_int, positive_seconds
from kraft.cli._connect import add_bootstrap_arguments, broker_bootstrap, parse_key_values
from kraft.cli.console_format import ENCODINGS, RecordFormatter

if TYPE_CHECKING:
    from kraft.types import TopicPartition
    from replication.clients import Consumer

_EPILOG = """\
examples:
  kraft consume events --from-beginning --max-messages 10 --bootstrap 127.0.0.1:9192
  kraft consume events --partition 2 --offset 100 --print-key --print-offset
  kraft consume events --partition 0 --offset -10 --timeout 2
  kraft consume --include 'events-.*' --from-beginning --property print.timestamp=true \\
      --property print.headers=true --property print.key=true
  kraft consume events --from-beginning --timeout 5 --json --encoding base64 > events.jsonl
  kraft consume events --group billing --from-beginning

With --group G the consumer joins consumer group G (KIP-848): the group's coordinator
assigns it a share of the partitions, each starting at the group's committed offset (else
at the end, or the beginning with --from-beginning), and it commits what it printed
(enable.auto.commit) every 5 s and on exit.

Reads every partition of the topics (several names, or every topic matching --include; or
only --partition of one topic) and prints one line per record, as Kafka's console consumer
formats it: --property print.timestamp, print.partition, print.offset, print.headers,
print.key (false by default), print.value (true), key.separator (a tab, between fields),
headers.separator, null.literal. --print-key and --print-offset are shorthands. --encoding
base64|hex prints keys, values and header values binary-safe (utf8 replaces invalid
bytes); --json prints one object per record. --offset takes a number, earliest, latest or
-N (N before the end, as rpk's -o -N). Starts at the end of each partition (only new
records) unless --from-beginning or --offset. Exits 0 after --max-messages records, or once
no record arrived for --timeout seconds; otherwise it runs until Ctrl-C.
"""


def idle_timeout(text: str) -> float:
    """``--timeout``: seconds > 0 without a record before exiting. 0 is refused: it would end
    before the first fetch came back and print "consumed 0 records" on a full topic (Kafka's
    console consumer does just that with --timeout-ms 0; one clear line is kinder)."""
    try:
        zero = float(text) == 0
    except ValueError:
        zero = False
    if zero:
        raise argparse.ArgumentTypeError(
            "0 would stop before the first record arrives; give the seconds without a record "
            "after which to exit (e.g. --timeout 5), or leave --timeout out to read until Ctrl-C"
        )
    return positive_seconds(text)


_METADATA_TIMEOUT_S = 10.0
"""How long to look for the topic before "cluster unreachable" / "unknown topic"."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "consume",
        help="print a topic's records (kafka-console-consumer)",
        description="Consume a topic's records and print them to stdout.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="the topics to read")
    p.add_argument(
        "--include", metavar="REGEX", help="also read every topic whose name matches REGEX"
    )
    add_bootstrap_arguments(p, controller=False)
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at each partition's log start offset (default: its end)",
    )
    p.add_argument(
        "--group", metavar="GROUP", help="join this consumer group (kafka-console-consumer)"
    )
    p.add_argument("--partition", type=non_negative_int, help="only this partition")
    p.add_argument(
        "--offset",
        metavar="OFFSET",
        help="start offset of --partition: a number, earliest, latest or -N (N before the end)",
    )
    p.add_argument(
        "--max-messages", type=non_negative_int, metavar="N", help="exit after N records"
    )
    p.add_argument(
        "--timeout",
        type=idle_timeout,
        metavar="SECONDS",
        help="exit once no record arrived for this long, > 0 (default: wait forever)",
    )
    p.add_argument("--print-key", action="store_true", help="print.key=true")
    p.add_argument(
        "--print-offset", action="store_true", help="print.partition=true print.offset=true"
    )
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a formatter property (repeatable), e.g. print.timestamp=true",
    )
    p.add_argument(
        "--encoding",
        choices=ENCODINGS,
        default="utf8",
        help="how keys, values and header values print (default utf8; base64 and hex are "
        "binary-safe)",
    )
    p.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any consumer config (repeatable), e.g. isolation.level=read_committed",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per record: topic, partition, offset, timestamp, headers, key, "
        "value (bytes in --encoding)",
    )
    p.set_defaults(handler=run)


def _start_offset(text: str | None) -> int | str | None:
    """None, ``earliest``, ``latest``, an absolute offset (>= 0) or a relative one (< 0: that
    many before the end)."""
    if text is None:
        return None
    if text in ("earliest", "latest"):
        return text
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"--offset must be a number, -N, earliest or latest, not {text[:40]!r}"
        ) from None


def run(args: argparse.Namespace) -> int:
    from kraft.cli._connect import describe_topic_on_brokers, security
    from kraft.types import TopicPartition
    from replication.clients import Consumer

    bootstrap = broker_bootstrap(args)
    start = _start_offset(args.offset)
    if start is not None and args.partition is None:
        raise ValueError("--offset needs --partition")
    if start is not None and args.from_beginning:
        raise ValueError("give --offset or --from-beginning, not both")
    properties = parse_key_values(args.property, "--property")
    if args.print_key:
        properties.setdefault("print.key", "true")
    if args.print_offset:
        properties.setdefault("print.partition", "true")
        properties.setdefault("print.offset", "true")
    formatter = RecordFormatter.from_properties(properties, args.encoding)
    options: dict[str, Any] = parse_key_values(args.consumer_property, "--consumer-property")
    names = _topic_names(bootstrap, args.topics, args.include)
    if args.partition is not None and len(names) != 1:
        raise ValueError("--partition needs exactly one topic")
    tps: list[TopicPartition] = []
    for name in names:
        topic = describe_topic_on_brokers(bootstrap, name, _METADATA_TIMEOUT_S, "consume")
        partitions = sorted(p.partition for p in topic.partitions)
        if args.partition is not None:
            if args.partition not in partitions:
                raise ValueError(
                    f"--partition {args.partition}: {name} has partitions 0..{len(partitions) - 1}"
                )
            partitions = [args.partition]
        tps.extend(TopicPartition(name, p) for p in partitions)

    if args.group is not None:
        if args.partition is not None or start is not None:
            raise ValueError("--group takes neither --partition nor --offset")
        options.setdefault("group_id", args.group)
        options.setdefault("auto_offset_reset", "earliest" if args.from_beginning else "latest")
    consumed = 0
    out = sys.stdout
    with Consumer(bootstrap, **{**security(), **options}) as consumer:
        if args.group is not None:
            consumer.subscribe(names)  # positions: the group's committed offsets
        else:
            _assign(consumer, tps, start, from_beginning=args.from_beginning)
        last_record = time.monotonic()
        polled = False
        try:
            while args.max_messages is None or consumed < args.max_messages:
                wait = 1.0
                if args.timeout is not None:
                    left = last_record + args.timeout - time.monotonic()
                    if left <= 0 and polled:
                        break
                    wait = min(wait, max(left, 0.0))
                records = consumer.poll(timeout=wait)
                polled = True  # NB: at least one poll, however short --timeout is
                if records:
                    last_record = time.monotonic()
                for record in records:
                    if args.max_messages is not None and consumed >= args.max_messages:
                        break
                    line = formatter.json(record) if args.json else formatter.line(record)
                    out.write(line + "\n")
                    consumed += 1
                out.flush()
        except KeyboardInterrupt:
            pass
    print(f"kraft: consumed {consumed} records", file=sys.stderr)
    return 0


def _assign(
    consumer: Consumer, tps: list[TopicPartition], start: int | str | None, *, from_beginning: bool
) -> None:
    consumer.assign(tps)
    if from_beginning or start == "earliest":
        consumer.seek_to_beginning()
    elif isinstance(start, int) and start < 0:
        consumer.seek(tps[0], _relative_to_end(consumer, tps[0], -start))
    elif isinstance(start, int):
        _check_in_range(consumer, tps[0], start)
        consumer.seek(tps[0], start)
    else:
        consumer.seek_to_end()
    # Resolve "the end" now, so records produced after this point are all printed.
    for tp in tps:
        consumer.position(tp, timeout=_METADATA_TIMEOUT_S)


def _topic_names(bootstrap: str, topics: list[str], include: str | None) -> list[str]:
    """The named topics, then those matching ``include`` (sorted, internal ones left out)."""
    names = list(dict.fromkeys(topics))
    if include is not None:
        try:
            pattern = re.compile(include)
        except re.error as e:
            raise ValueError(f"--include {include[:60]!r} is not a regex: {e}") from None
        from kraft.types import INTERNAL_TOPICS
        from replication.clients import AdminClient

        with AdminClient(bootstrap) as admin:
            listed = [n for n in admin.list_topics() if n not in INTERNAL_TOPICS]
        # NB: internal topics are left out, as Kafka's exclude.internal.topics=true does.
        names.extend(n for n in listed if pattern.fullmatch(n) and n not in names)
        if not names:
            raise ValueError(f"--include {include[:60]!r} matches no topic")
    if not names:
        raise ValueError("name a topic, or give --include REGEX")
    return names


def _relative_to_end(consumer: Consumer, tp: TopicPartition, count: int) -> int:
    """The offset ``count`` records before the end of ``tp`` (not before its log start)."""
    consumer.seek_to_beginning([tp])
    start = consumer.position(tp, timeout=_METADATA_TIMEOUT_S)
    consumer.seek_to_end([tp])
    end = consumer.position(tp, timeout=_METADATA_TIMEOUT_S)
    return max(start, end - count)


def _check_in_range(consumer: Consumer, tp: TopicPartition, offset: int) -> None:
    """Refuse an ``--offset`` outside the partition's log instead of quietly starting at its
    end (or start): look both ends up with ListOffsets first.

    Raises:
        OffsetOutOfRangeError: ``offset`` is past the log end offset or before the log start
            offset (Kafka error 1).
    """
    from storage.errors import OffsetOutOfRangeError

    consumer.seek_to_beginning([tp])
    start = consumer.position(tp, timeout=_METADATA_TIMEOUT_S)
    consumer.seek_to_end([tp])
    end = consumer.position(tp, timeout=_METADATA_TIMEOUT_S)
    where = f"{tp.topic}-{tp.partition}"
    if offset > end:
        raise OffsetOutOfRangeError(
            f"--offset {offset} is past the log end offset {end} of {where}",
            log_start_offset=start,
            log_end_offset=end,
        )
    if offset < start:
        raise OffsetOutOfRangeError(
            f"--offset {offset} is before the log start offset {start} of {where}",
            log_start_offset=start,
            log_end_offset=end,
        )
