"""The `kraft` command line: the one composition root, which imports the rest lazily.

Each subcommand lives in its own module with ``add_parser(subparsers)``; handlers import what
they need when they run, so ``kraft --help`` stays fast. Errors end as one line on stderr and a
non-zero exit code; Ctrl-C ends with exit code 130 and no traceback, from the first moment:
this module imports only the standard library at the top, and `main` imports everything else
inside its guard.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def build_parser() -> argparse.ArgumentParser:
    from kraft.arguments import ArgumentParser
    from kraft.cli import (
        acls,
        bench,
        broker,
        certs,
        cluster,
        compare,
        configs,
        consume,
        controller,
        dump_log,
        features,
        fuzz,
        groups,
        interop,
        nemesis,
        netns,
        peer,
        produce,
        quorum,
        sim,
        soak,
        topics,
        transactions,
    )
    from kraft.logs import LEVELS

    parser = ArgumentParser(
        prog="kraft",
        description="kraft: a Kafka-style replicated log (Raft controllers, ISR brokers).",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        type=str.lower,
        choices=list(LEVELS),
        metavar="LEVEL",
        help="debug, info, warning (default), error or critical",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (
        cluster,
        topics,
        configs,
        produce,
        consume,
        groups,
        transactions,
        acls,
        features,
        controller,
        broker,
        quorum,
        certs,
        dump_log,
        bench,
        compare,
        sim,
        nemesis,
        soak,
        netns,
        fuzz,
        peer,
        interop,
    ):
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code.

    Ctrl-C (KeyboardInterrupt) at any point, imports and argument parsing included, ends with
    130, as a shell reports a process ended by SIGINT, and no traceback.
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130


_NODE_COMMANDS = frozenset({"controller", "broker"})
"""Servers: their logs are files (JSON lines), gRPC's own lines included."""


def _main(argv: Sequence[str] | None) -> int:
    import os

    import kraft

    node = _command(sys.argv[1:] if argv is None else list(argv)) in _NODE_COMMANDS
    if not node and kraft.GRPC_VERBOSITY_DEFAULTED and "grpc" not in sys.modules:
        # gRPC's C core writes its own lines (a TLS handshake that failed, a refused
        # connection) to stderr before kraft's one line says the same thing better; silence
        # it before grpc is first imported, unless the user chose a verbosity.
        os.environ["GRPC_VERBOSITY"] = "NONE"
    if node:
        # kio (the Kafka codec) imports hypothesis for its test strategies whenever it is
        # installed, as it is beside the test tools: 0.3 s of every node's start. A server
        # never draws test data, so it reads hypothesis as absent.
        sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
        from kraft.gc_tuning import tune_server_malloc

        tune_server_malloc()  # before gRPC starts its threads
    from kraft.cluster.process import die_with_parent
    from kraft.gc_tuning import tune_gc

    die_with_parent()  # a no-op unless started by a ManagedProcess (LocalCluster, the bench)
    tune_gc()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "passthrough", False):
        args.rest = extra  # the subcommand parses its own options
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from kraft.logs import configure_cli_logging, configure_logging

    if node:
        configure_logging(args.log_level)
    else:
        configure_cli_logging(args.log_level)
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
    return code


def _command(argv: list[str]) -> str | None:
    """The subcommand in ``argv`` (the first word after the global options), if any."""
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


if __name__ == "__main__":
    sys.exit(main())
