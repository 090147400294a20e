"""Identifier types shared by every layer (re-exported by ``kraft.types``)."""

from __future__ import annotations

from typing import NewType

Offset = NewType("Offset", int)
"""A position in a log: the offset of a record."""

Epoch = NewType("Epoch", int)
"""A leader epoch (the Raft term for the metadata log)."""
