"""docs/cli.md describes exactly what exists: every command of `kraft` (walked from the parser,
so a new one cannot be forgotten) has an example in its ``--help``, a place in docs/cli.md,
and every option it takes is named there; the admin and console commands print JSON with
``--json`` (issue 14: "every command has --help with an example and --json")."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraft.cli import build_parser

DOCS = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()

JSON_GROUPS = (
    "topics",
    "configs",
    "groups",
    "transactions",
    "acls",
    "quorum",
    "certs",
    "produce",
    "consume",
)
"""Commands (by their first word) whose every action takes ``--json``; also `cluster status`,
`dump-log`, `nemesis` and `fuzz`."""


def _leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield "kraft " + " ".join(path), parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, (*path, name))


COMMANDS = dict(_leaves(build_parser()))


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [
        option
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]


def test_the_walk_finds_the_commands() -> None:
    assert {"kraft topics create", "kraft groups describe", "kraft sim raft"} <= set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_an_example_and_is_documented_with_every_option(command: str) -> None:
    parser = COMMANDS[command]
    assert "example" in (parser.epilog or ""), f"{command} --help shows no example"
    assert command in DOCS, f"docs/cli.md never names {command!r}"
    missing = [o for o in _options(parser) if not re.search(rf"(?<![\w-]){o}(?![\w-])", DOCS)]
    assert not missing, f"docs/cli.md does not name {command}'s {missing}"


@pytest.mark.parametrize(
    "command",
    sorted(
        c
        for c in COMMANDS
        if c.split()[1] in JSON_GROUPS
        or c in ("kraft cluster status", "kraft dump-log", "kraft nemesis", "kraft fuzz")
    ),
)
def test_admin_and_console_commands_print_json(command: str) -> None:
    assert "--json" in _options(COMMANDS[command]), f"{command} has no --json"
