"""``kraft dump-log PATH``: print the batches of segment files, like kafka-dump-log."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "dump-log",
        help="print the record batches of a segment file or a log directory",
        description="Print the record batches of a segment file or a log directory.",
        epilog="example: kraft dump-log /tmp/kraft-demo/log --records",
    )
    p.add_argument("path", help="a .log segment file or a directory of them")
    p.add_argument("--records", action="store_true", help="also print every record")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(handler=run)


def _horizon(ms: int | None) -> str:
    """Kafka's ``DumpLogSegments`` prints the batch's ``OptionalLong`` (KIP-534)."""
    return "OptionalLong.empty" if ms is None else f"OptionalLong[{ms}]"


def _line(b: dict[str, Any]) -> str:
    return (
        f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} count: {b['count']} "
        f"baseSequence: {b['base_sequence']} lastSequence: {b['last_sequence']} "
        f"producerId: {b['producer_id']} producerEpoch: {b['producer_epoch']} "
        f"partitionLeaderEpoch: {b['partition_leader_epoch']} "
        f"isTransactional: {str(b['is_transactional']).lower()} "
        f"isControl: {str(b['is_control']).lower()} "
        f"deleteHorizonMs: {_horizon(b['delete_horizon_ms'])} position: {b['position']} "
        f"{'CreateTime' if b['timestamp_type'] == 'CREATE_TIME' else 'LogAppendTime'}: "
        f"{b['max_timestamp_ms']} size: {b['size']} magic: {b['magic']} "
        f"compresscodec: {b['compression']} crc: {b['crc']} isvalid: {str(b['crc_valid']).lower()}"
    )


def run(args: argparse.Namespace) -> int:
    from storage.dump import TailProblem, describe_segment, not_a_segment, segment_files

    files = segment_files(args.path)
    if not files:
        print(
            f"kraft: error: no segment files (<20-digit base offset>.log) under {args.path}",
            file=sys.stderr,
        )
        return 1
    for path in files:  # all checked before any is printed: one line, not a half dump
        problem = not_a_segment(path)
        if problem is not None:
            raise ValueError(f"{path} is not a kraft/Kafka log segment: {problem}")
    invalid = 0
    out = sys.stdout
    for path in files:
        if not args.json:
            print(f"Dumping {path}", file=out)
        for item in describe_segment(path, records=args.records):
            if isinstance(item, TailProblem):
                invalid += 1
                if args.json:
                    print(
                        json.dumps(
                            {
                                "file": str(path),
                                "tail_problem": item.reason,
                                "position": item.position,
                                "size": item.size_bytes,
                            }
                        ),
                        file=out,
                    )
                else:
                    print(
                        f"  ! {item.size_bytes} bytes at position {item.position} are not a "
                        f"whole batch ({item.reason}): recovery would cut them",
                        file=out,
                    )
                continue
            if not item["crc_valid"]:
                invalid += 1
            if args.json:
                print(json.dumps({"file": str(path), **item}), file=out)
                continue
            print(_line(item), file=out)
            for r in item.get("records", ()):
                print(
                    f"| offset: {r['offset']} CreateTime: {r['timestamp_ms']} "
                    f"key: {r['key']} value: {r['value']} headers: {r['headers']}",
                    file=out,
                )
    return 0
