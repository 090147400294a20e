"""The `kraft` command line: the one composition root, which imports the rest lazily.

Each subcommand lives in its own module with ``add_parser(subparsers)``; handlers import what
they need when they run, so ``kraft --help`` stays fast. Errors end as one line on stderr and a
non-zero exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kraft.cli import (
    bench,
    broker,
    cluster,
    consume,
    controller,
    dump_log,
    produce,
    quorum,
    sim,
    topics,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kraft",
        description="kraft: a Kafka-style replicated log (Raft controllers, ISR brokers).",
    )
    parser.add_argument("--log-level", default="warning", help="debug, info, warning (default)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (
        cluster,
        topics,
        produce,
        consume,
        controller,
        broker,
        quorum,
        dump_log,
        bench,
        sim,
    ):
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from kraft.process import die_with_parent

    die_with_parent()  # a no-op unless started by a ManagedProcess (LocalCluster, the bench)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "passthrough", False):
        args.rest = extra  # the subcommand parses its own options
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from kraft.logs import configure_logging

    configure_logging(args.log_level)
    from storage.errors import KraftError

    try:
        code: int = args.handler(args)
    except KraftError as e:
        print(f"kraft: error: {e.message} ({e.code.name})", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (``kraft consume ... | head``): like Unix tools, stop quietly.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (OSError, ValueError) as e:
        print(f"kraft: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
