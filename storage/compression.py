"""Record-batch compression: the codecs, compressing a records section, and bounded inflation.

A compressed batch (attribute bits 0-2 name the codec) holds its whole records section as one
frame of that codec; the 61-byte header stays uncompressed. kraft supports zstd and lz4 (the
codec libraries are imported on first use); gzip and snappy answer
UNSUPPORTED_COMPRESSION_TYPE. Every reader and the broker's validation inflate through
`decompress_records`, which refuses a frame that is not whole (CORRUPT_MESSAGE) or that
inflates past `MAX_DECOMPRESSED_BYTES` (MESSAGE_TOO_LARGE), so a small "zip bomb" is never
buffered and what a leader accepts is exactly what a consumer can decode.
"""

from __future__ import annotations

import enum

from storage.errors import (
    CorruptRecordError,
    KraftError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)


class Compression(enum.IntEnum):
    """Per-batch compression codecs (Kafka's numbering; gzip and snappy are not supported)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def compress(codec: Compression, data: bytes) -> bytes:
    if codec is Compression.NONE:
        return data
    if codec is Compression.ZSTD:
        import zstandard

        return zstandard.ZstdCompressor(level=3).compress(data)
    if codec is Compression.LZ4:
        import lz4.frame

        return bytes(lz4.frame.compress(data))
    raise UnsupportedCompressionTypeError(f"compression {codec.name} is not supported")


MAX_DECOMPRESSED_BYTES = 64 << 20
"""The most a compressed batch's records may inflate to (64 MiB, gRPC's message limit here): a
small batch that decompresses to gigabytes (a "zip bomb") is refused, not buffered."""


def decompress_records(
    codec: Compression, data: bytes | memoryview, limit: int = MAX_DECOMPRESSED_BYTES
) -> bytes:
    """The records section of a compressed batch: one whole frame of ``codec``, at most
    ``limit`` bytes once inflated. The broker's validation and every reader use this one
    function, so what a leader accepts is exactly what a consumer can decode.

    Raises:
        CorruptRecordError: the data is not one whole frame of ``codec`` (garbage, truncated).
        RecordTooLargeError: the records inflate to more than ``limit`` bytes.
        UnsupportedCompressionTypeError: ``codec`` is gzip or snappy.
    """
    try:
        if codec is Compression.ZSTD:
            import zstandard

            raw = bytes(data)
            declared = zstandard.frame_content_size(raw)
            if declared > limit:
                raise RecordTooLargeError(f"zstd records declare {declared} bytes > {limit}")
            decompressor = zstandard.ZstdDecompressor()
            try:
                # NB: without a declared size, max_output_size bounds the output buffer.
                return decompressor.decompress(raw, max_output_size=limit)
            except zstandard.ZstdError:
                if len(decompressor.stream_reader(raw).read(limit + 1)) > limit:
                    raise RecordTooLargeError(
                        f"zstd records inflate to more than {limit} bytes"
                    ) from None
                raise
        if codec is Compression.LZ4:
            import lz4.frame

            decompressor = lz4.frame.LZ4FrameDecompressor()
            out = decompressor.decompress(bytes(data), max_length=limit + 1)
            if len(out) > limit:
                raise RecordTooLargeError(f"lz4 records inflate to more than {limit} bytes")
            if not decompressor.eof:
                raise CorruptRecordError("truncated lz4 frame")
            return bytes(out)
    except KraftError:
        raise
    except Exception as e:  # the codecs raise their own error types on garbage
        raise CorruptRecordError(f"cannot decompress {codec.name} records: {str(e)[:200]}") from e
    raise UnsupportedCompressionTypeError(f"compression {codec.name} is not supported")


__all__ = ["MAX_DECOMPRESSED_BYTES", "Compression", "compress", "decompress_records"]
