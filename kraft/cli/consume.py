"""``kraft consume TOPIC``: print records to stdout, like ``kafka-console-consumer``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from kraft.arguments import non_negative_int, non_negative_seconds
from kraft.cli._connect import add_bootstrap_arguments, broker_bootstrap, parse_key_values

if TYPE_CHECKING:
    from kraft.types import TopicPartition
    from replication.clients import Consumer, ConsumerRecord

_EPILOG = """\
examples:
  kraft consume events --from-beginning --max-messages 10 --bootstrap 127.0.0.1:9192
  kraft consume events --partition 2 --offset 100 --print-key --print-offset
  kraft consume events --from-beginning --timeout 5 --json > events.jsonl
  kraft consume events --group billing --from-beginning

With --group G the consumer joins consumer group G (KIP-848): the group's coordinator
assigns it a share of the partitions, each starting at the group's committed offset (else
at the end, or the beginning with --from-beginning), and it commits what it printed
(enable.auto.commit) every 5 s and on exit.

Reads every partition of the topic (or only --partition) and prints one line per record:
its value, preceded by "Partition:P<TAB>Offset:O<TAB>" with --print-offset and by the key
and a tab with --print-key (a missing key prints as "null"). Starts at the end of each
partition (only new records) unless --from-beginning or --offset. Exits 0 after
--max-messages records, or once no record arrived for --timeout seconds; otherwise it runs
until Ctrl-C.
"""

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
    p.add_argument("topic")
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
        help="start offset of --partition: a number, earliest or latest",
    )
    p.add_argument(
        "--max-messages", type=non_negative_int, metavar="N", help="exit after N records"
    )
    p.add_argument(
        "--timeout",
        type=non_negative_seconds,
        metavar="SECONDS",
        help="exit once no record arrived for this long (default: wait forever)",
    )
    p.add_argument("--print-key", action="store_true", help="print KEY<TAB>VALUE")
    p.add_argument("--print-offset", action="store_true", help="print partition and offset")
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
        help="one JSON object per record: partition, offset, timestamp, key, value",
    )
    p.set_defaults(handler=run)


def _start_offset(text: str | None) -> int | str | None:
    if text is None:
        return None
    if text in ("earliest", "latest"):
        return text
    try:
        offset = int(text)
    except ValueError:
        raise ValueError(f"--offset must be a number, earliest or latest, not {text!r}") from None
    if offset < 0:
        raise ValueError(f"--offset must be >= 0, not {offset}")
    return offset


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
    options: dict[str, Any] = parse_key_values(args.consumer_property, "--consumer-property")
    topic = describe_topic_on_brokers(bootstrap, args.topic, _METADATA_TIMEOUT_S, "consume")
    partitions = sorted(p.partition for p in topic.partitions)
    if args.partition is not None:
        if args.partition not in partitions:
            raise ValueError(
                f"--partition {args.partition}: {args.topic} has partitions "
                f"0..{len(partitions) - 1}"
            )
        partitions = [args.partition]
    tps = [TopicPartition(args.topic, p) for p in partitions]

    if args.group is not None:
        if args.partition is not None or start is not None:
            raise ValueError("--group takes neither --partition nor --offset")
        options.setdefault("group_id", args.group)
        options.setdefault("auto_offset_reset", "earliest" if args.from_beginning else "latest")
    consumed = 0
    out = sys.stdout
    with Consumer(bootstrap, **{**security(), **options}) as consumer:
        if args.group is not None:
            consumer.subscribe([args.topic])  # positions: the group's committed offsets
        else:
            _assign(consumer, tps, start, from_beginning=args.from_beginning)
        last_record = time.monotonic()
        try:
            while args.max_messages is None or consumed < args.max_messages:
                wait = 1.0
                if args.timeout is not None:
                    left = last_record + args.timeout - time.monotonic()
                    if left <= 0:
                        break
                    wait = min(wait, left)
                records = consumer.poll(timeout=wait)
                if records:
                    last_record = time.monotonic()
                for record in records:
                    if args.max_messages is not None and consumed >= args.max_messages:
                        break
                    out.write(_format(record, args) + "\n")
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
    elif isinstance(start, int):
        _check_in_range(consumer, tps[0], start)
        consumer.seek(tps[0], start)
    else:
        consumer.seek_to_end()
    # Resolve "the end" now, so records produced after this point are all printed.
    for tp in tps:
        consumer.position(tp, timeout=_METADATA_TIMEOUT_S)


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


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


def _format(record: ConsumerRecord, args: argparse.Namespace) -> str:
    if args.json:
        return json.dumps(
            {
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key": None if record.key is None else _text(record.key),
                "value": None if record.value is None else _text(record.value),
            }
        )
    parts = []
    if args.print_offset:
        parts.append(f"Partition:{record.partition}\tOffset:{record.offset}")
    if args.print_key:
        parts.append(_text(record.key))
    parts.append(_text(record.value))
    return "\t".join(parts)
