"""v2 record batches decoded straight into Arrow, in Spark's Kafka source schema: the one
decoder of the Spark reader and of `Consumer.poll_batch`.

`decode_arrow` takes the record bytes of one partition's Fetch response and returns one
`pyarrow.RecordBatch` of the records in an offset range, with no Python object per record on
the common path (`storage.columnar.vectorized`: uncompressed batches, numpy over the whole
response) and record by record otherwise (`storage.columnar.schema.ColumnBuilder`: compressed
batches, headers, anything malformed, which then raises the precise `CorruptRecordError`).

pyarrow and numpy are optional (the ``spark`` extra): import this package only where Arrow is
wanted. `require_arrow` says what to install when they are missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

INSTALL_HINT = "pip install 'kraft[spark]'"

HEADER_COLUMNS = frozenset({"topic", "partition", "offset", "timestampType"})
"""The columns a batch header alone gives (where its offsets have no gaps): a query that
needs only these (a ``count()``) decodes no record."""


def require_arrow(feature: str) -> None:
    """Raise ImportError naming ``feature`` and the extra to install when pyarrow or numpy is
    missing."""
    try:
        import numpy  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise ImportError(
            f"{feature} needs pyarrow and numpy, which are optional: {INSTALL_HINT} "
            f"({e.name or e} is missing)"
        ) from e


def decode_arrow(
    data: bytes,
    position: int,
    until: int,
    topic: str,
    partition: int,
    *,
    include_headers: bool,
    columns: Sequence[str] | None = None,
) -> pa.RecordBatch:
    """The records with offsets in ``[position, until)`` of ``data`` (whole v2 batches as a
    Fetch returns them; control batches skipped, a torn last batch ignored) as one RecordBatch
    of `storage.columnar.schema.arrow_schema` (``include_headers`` adds ``headers``), or of
    only ``columns`` of it, in that order. Columns in `HEADER_COLUMNS` alone are read from the
    batch headers without decoding a record (where a batch's offsets have gaps, after
    compaction, its records are decoded).

    Raises:
        CorruptRecordError: a malformed batch (CRCs are the caller's to check).
    """
    from storage.columnar.schema import ColumnBuilder
    from storage.columnar.vectorized import decode_columns, header_columns

    if columns is not None:
        if HEADER_COLUMNS.issuperset(columns):
            batch = header_columns(data, position, until, topic, partition)
            if batch is not None:
                return batch.select(list(columns))
        full = decode_arrow(
            data, position, until, topic, partition, include_headers=include_headers
        )
        return full.select(list(columns))
    batch = decode_columns(data, position, until, topic, partition, include_headers=include_headers)
    if batch is None:  # compressed, with headers, or malformed: record by record
        builder = ColumnBuilder(topic, partition, include_headers=include_headers)
        builder.add(data, position, until)
        batch = builder.build()
    return batch


__all__ = ["HEADER_COLUMNS", "INSTALL_HINT", "decode_arrow", "require_arrow"]
