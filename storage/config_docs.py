"""The configuration tables of docs/operations.md, generated from the config registry.

``python -m storage.config_docs docs/operations.md`` rewrites every block between
``<!-- generated from storage/config_registry.py: NAME -->`` and
``<!-- end of generated table -->``; ``tests/test_config_registry.py`` fails when the page and
the registry differ.
"""

from __future__ import annotations

from typing import Final

from storage.config_key import ConfigKey, Reader
from storage.config_registry import NODE_REGISTRY, TOPIC_REGISTRY

_RAFT = "RaftConfig"


def _default_cell(key: ConfigKey) -> str:
    if key.shown_default is not None:
        return key.shown_default
    return key.default if key.default is not None else "(none)"


def _name_cell(key: ConfigKey) -> str:
    own = " (kraft's own)" if key.kraft_only else ""
    per_listener = " (also per listener: `listener.name.<listener>.`)" if key.per_listener else ""
    return f"`{key.name}`{own}{per_listener}"


def markdown_table(table: str) -> str:
    """One configuration table of docs/operations.md: ``controller``, ``raft``, ``broker`` or
    ``topic``. A test holds the docs equal to these."""
    rows: list[str]
    match table:
        case "controller" | "broker":
            reader = Reader.CONTROLLER if table == "controller" else Reader.BROKER
            keys = [k for k in NODE_REGISTRY if reader in k.readers and k.owner != _RAFT]
            rows = ["| key | default | meaning |", "|---|---|---|"]
            rows += [f"| {_name_cell(k)} | {_default_cell(k)} | {k.doc} |" for k in keys]
            if reader is Reader.BROKER:
                rows += [
                    f"| `{k.synonym}` | {_default_cell(k)} | this broker's default for the topic "
                    f"key `{k.name}` (see there); a value the topic key refuses makes the broker "
                    "exit 1 at start |"
                    for k in TOPIC_REGISTRY
                    if k.synonym is not None and k.owner is not None
                ]
        case "raft":
            rows = ["| key | default | meaning |", "|---|---|---|"]
            rows += [
                f"| {_name_cell(k)} | {_default_cell(k)} | {k.doc} |"
                for k in NODE_REGISTRY
                if k.owner == _RAFT
            ]
        case "topic":
            rows = ["| key | default | cluster default | meaning |", "|---|---|---|---|"]
            rows += [
                f"| {_name_cell(k)} | {_default_cell(k)} | "
                f"{f'`{k.synonym}`' if k.synonym else '-'} | {k.doc} |"
                for k in TOPIC_REGISTRY
            ]
        case _:
            raise ValueError(f"no table {table!r}")
    return "\n".join(rows)


TABLES: Final = ("controller", "raft", "broker", "topic")
_BEGIN = "<!-- generated from storage/config_registry.py: {} -->"
_END = "<!-- end of generated table -->"


def rewrite_doc(text: str) -> str:
    """``text`` with every generated table block replaced by `markdown_table`'s output.

    Run ``python -m storage.config_docs docs/operations.md`` after changing a key.
    """
    for table in TABLES:
        begin = _BEGIN.format(table)
        start = text.find(begin)
        if start < 0:
            continue
        end = text.index(_END, start)
        text = text[: start + len(begin)] + "\n" + markdown_table(table) + "\n" + text[end:]
    return text


if __name__ == "__main__":  # pragma: no cover - a maintainer's tool
    import sys
    from pathlib import Path

    for name in sys.argv[1:]:
        doc = Path(name)
        doc.write_text(rewrite_doc(doc.read_text()))


__all__ = ["TABLES", "markdown_table", "rewrite_doc"]
