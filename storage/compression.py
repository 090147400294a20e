"""Record-batch compression: the codecs, compressing a records section, and bounded inflation.

A compressed batch (attribute bits 0-2 name the codec) holds its whole records section as one
frame of that codec; the 61-byte header stays uncompressed. kraft supports Kafka's four codecs
(the codec libraries are imported on first use):

=====  ======  =====================================================================
id     codec   frame
=====  ======  =====================================================================
1      gzip    one gzip member (RFC 1952; stdlib zlib), as Java's GZIPOutputStream
2      snappy  xerial's block framing (``\\x82SNAPPY\\x00``, version 1, compat 1, then
               BE int32-length blocks of at most 32 KiB uncompressed), as the Java
               client's SnappyOutputStream and kafka-python write; a raw snappy block
               (no framing) is read too, as kafka-python and Kafka's broker accept
3      lz4     one LZ4 frame
4      zstd    one zstd frame
=====  ======  =====================================================================

Every reader and the broker's validation inflate through `decompress_records`, which refuses
a frame that is not whole (CORRUPT_MESSAGE) or that inflates past `MAX_DECOMPRESSED_BYTES`
(MESSAGE_TOO_LARGE), so a small "zip bomb" is never buffered and what a leader accepts is
exactly what a consumer can decode. `recompress_batch` is the leader's conversion to a topic's
``compression.type`` (Kafka's ``LogValidator``).
"""

from __future__ import annotations

import enum
import struct
import zlib

import google_crc32c

from storage.errors import (
    CorruptRecordError,
    KraftError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)


class Compression(enum.IntEnum):
    """Per-batch compression codecs (Kafka's numbering)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


CODEC_NAMES: dict[str, Compression] = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
"""A producer's ``compression.type`` values, as Kafka names them."""

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with 1
_XERIAL_BLOCK_BYTES = 32 * 1024  # xerial's default block size, as kafka-python's
_BLOCK_LENGTH = struct.Struct(">i")


def compress(codec: Compression, data: bytes) -> bytes:
    if codec is Compression.NONE:
        return data
    if codec is Compression.ZSTD:
        import zstandard

        return zstandard.ZstdCompressor(level=3).compress(data)
    if codec is Compression.LZ4:
        import lz4.frame

        return bytes(lz4.frame.compress(data))
    if codec is Compression.GZIP:
        # wbits 31: a gzip member (header and CRC-32 trailer), as GZIPOutputStream writes.
        # NB: level 6 is zlib's default; Kafka's gzip default level is also 6 (KIP-390).
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec is Compression.SNAPPY:
        return _snappy_xerial_compress(data)
    raise UnsupportedCompressionTypeError(f"compression {codec.name} is not supported")


def _snappy_xerial_compress(data: bytes) -> bytes:
    import cramjam

    out = [_XERIAL_HEADER]
    view = memoryview(data)
    for i in range(0, len(data), _XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(bytes(view[i : i + _XERIAL_BLOCK_BYTES])))
        out.append(_BLOCK_LENGTH.pack(len(block)))
        out.append(block)
    return b"".join(out)


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
        UnsupportedCompressionTypeError: ``codec`` is not one of Kafka's codecs.
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
        if codec is Compression.GZIP:
            inflater = zlib.decompressobj(31)  # a gzip member only
            out = inflater.decompress(bytes(data), limit + 1)
            if len(out) > limit:
                raise RecordTooLargeError(f"gzip records inflate to more than {limit} bytes")
            if not inflater.eof:
                raise CorruptRecordError("truncated gzip member")
            return out
        if codec is Compression.SNAPPY:
            return _snappy_decompress(bytes(data), limit)
    except KraftError:
        raise
    except Exception as e:  # the codecs raise their own error types on garbage
        raise CorruptRecordError(f"cannot decompress {codec.name} records: {str(e)[:200]}") from e
    raise UnsupportedCompressionTypeError(f"compression {codec.name} is not supported")


def _snappy_decompress(raw: bytes, limit: int) -> bytes:
    """xerial-framed snappy (what Kafka's Java client and kafka-python write), else one raw
    snappy block. Each block's declared length is checked against ``limit`` before it is
    inflated."""
    if not raw.startswith(_XERIAL_MAGIC):
        return _snappy_block(raw, limit)
    if len(raw) < len(_XERIAL_HEADER):
        raise CorruptRecordError("truncated xerial snappy header")
    out: list[bytes] = []
    total = 0
    pos = len(_XERIAL_HEADER)
    while pos < len(raw):
        if len(raw) - pos < _BLOCK_LENGTH.size:
            raise CorruptRecordError("truncated xerial snappy block length")
        (n,) = _BLOCK_LENGTH.unpack_from(raw, pos)
        pos += _BLOCK_LENGTH.size
        if n < 0 or pos + n > len(raw):
            raise CorruptRecordError(f"xerial snappy block of {n} bytes runs past the batch")
        block = _snappy_block(raw[pos : pos + n], limit - total)
        total += len(block)
        out.append(block)
        pos += n
    return b"".join(out)


def _snappy_block(raw: bytes, limit: int) -> bytes:
    import cramjam

    declared = cramjam.snappy.decompress_raw_len(raw)
    if declared > limit:
        raise RecordTooLargeError(f"snappy records inflate to more than {limit} bytes")
    return bytes(cramjam.snappy.decompress_raw(raw))


_ATTRIBUTES = 21  # offset of the attributes in a v2 batch (the CRC covers from here)
_CODEC_MASK = 0x07
_HEADER_SIZE = 61
_LENGTH = struct.Struct(">i")
_ATTRS = struct.Struct(">h")
_CRC = struct.Struct(">I")


def recompress_batch(batch: bytes, target: Compression) -> bytes:
    """``batch`` (one whole, validated v2 batch) with its records section in ``target``'s
    codec: Kafka's ``LogValidator`` conversion when a topic's ``compression.type`` differs
    from the producer's codec. Every other header field (offsets, timestamps, producer id,
    epoch, base sequence, attribute bits above the codec) is kept; the batch length and the
    CRC-32C are recomputed. A batch already in ``target`` is returned as it is.

    Raises:
        CorruptRecordError / RecordTooLargeError: as `decompress_records`.
    """
    attributes = _ATTRS.unpack_from(batch, _ATTRIBUTES)[0]
    code = attributes & _CODEC_MASK
    if code == target:
        return batch
    body = memoryview(batch)[_HEADER_SIZE:]
    records = bytes(body) if code == 0 else decompress_records(Compression(code), body)
    out = bytearray(batch[:_HEADER_SIZE])
    out += compress(target, records)
    _LENGTH.pack_into(out, 8, len(out) - 12)  # the length counts from the leader epoch on
    _ATTRS.pack_into(out, _ATTRIBUTES, (attributes & ~_CODEC_MASK) | int(target))
    _CRC.pack_into(out, 17, google_crc32c.value(bytes(out[_ATTRIBUTES:])))
    return bytes(out)


__all__ = [
    "CODEC_NAMES",
    "MAX_DECOMPRESSED_BYTES",
    "Compression",
    "compress",
    "decompress_records",
    "recompress_batch",
]
