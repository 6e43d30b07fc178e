"""Unsigned LEB128, declared once as a construct type that parses and builds.

LLVM reads most map fields with ``readULEB128As<uint32_t>``: a value over the
width is an error ("exceeds UINT32_MAX"), and so is a ULEB that runs off the end
of the data.  :class:`ULEB` raises :class:`MapFault` with the byte offset of the
field's first byte, so decoders can name exactly where trust ends.

The construct types (:class:`ULEB`, :class:`Fixed`, :class:`MapFault`) are declared on
first use (:func:`bbmap.formats.lazy_declarations`): the fast decoders need only the
constants and the plain functions, and construct is ~7 ms of start-up.
"""

from __future__ import annotations

from typing import Any

from bbmap.formats import lazy_declarations

LEB_GROUP_BITS = 7  # payload bits per byte
LEB_PAYLOAD = 0x7F
LEB_MORE = 0x80  # set on every byte but the last: a byte below it ends the number
SLEB_SIGN = 0x40  # in the last byte of a signed LEB128: the value is negative
MAX_ULEB_BYTES = 10  # a u64 needs at most ten 7-bit groups


def encode_uleb(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"ULEB128 cannot encode negative value {value}")
    out = bytearray()
    while True:
        byte = value & LEB_PAYLOAD
        value >>= LEB_GROUP_BITS
        if value:
            out.append(byte | LEB_MORE)
        else:
            out.append(byte)
            return bytes(out)


def decode_uleb(data: bytes | memoryview, pos: int, end: int | None = None, *,
                offset: int | None = None, path: str | None = None) -> tuple[int, int]:
    """Return ``(value, next_pos)``; raise :class:`MapFault` if it runs past ``end``.

    ``offset`` is the byte offset faults name (default ``pos``: where the number starts).
    """
    end = len(data) if end is None else end
    start = pos if offset is None else offset
    value = shift = 0
    while True:
        if pos >= end:
            raise map_fault(f"unable to decode LEB128 at offset {start:#010x}: "
                           "malformed uleb128, extends past end", start, path)
        b = data[pos]
        pos += 1
        value |= (b & LEB_PAYLOAD) << shift
        shift += LEB_GROUP_BITS
        if b < LEB_MORE:
            return value, pos
        if shift >= LEB_GROUP_BITS * MAX_ULEB_BYTES:
            raise map_fault(f"ULEB128 value at offset {start:#x} exceeds UINT64_MAX", start, path)


def decode_sleb(data: bytes, pos: int) -> tuple[int, int]:
    """Signed LEB128 at ``pos``: ``(value, next_pos)`` (ELF CREL relocations use it)."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise map_fault("malformed sleb128, extends past end", pos)
        b = data[pos]
        pos += 1
        value |= (b & LEB_PAYLOAD) << shift
        shift += LEB_GROUP_BITS
        if b < LEB_MORE:
            if b & SLEB_SIGN:
                value -= 1 << shift
            return value, pos


def check_width(value: int, bits: int, offset: int) -> int:
    if bits and value >> bits:
        limit = "UINT32_MAX" if bits == 32 else "UINT64_MAX"
        raise map_fault(f"ULEB128 value at offset {offset:#x} exceeds {limit} "
                       f"({(1 << bits) - 1:#x})", offset)
    return value


def _declare() -> dict[str, Any]:
    """The construct types of this module (built once, on first use: bbmap.formats)."""
    from construct import Construct, ConstructError, SizeofError, stream_tell
    from construct.core import stream_write

    class MapFault(ConstructError):
        """A decode fault at a byte offset (relative to the stream the struct parses)."""

        def __init__(self, message: str, offset: int, path: str | None = None) -> None:
            super().__init__(message, path=path)
            self.message = message
            self.offset = offset

    class ULEB(Construct):
        """ULEB128 limited to ``bits`` (32 or 64) like LLVM's ``readULEB128As<uintN_t>``."""

        def __init__(self, bits: int = 64) -> None:
            super().__init__()
            self.bits = bits

        def _parse(self, stream, context, path):
            start = stream_tell(stream, path)
            head = stream.read(MAX_ULEB_BYTES)  # the longest a ULEB128 can be; rest goes back
            value, used = decode_uleb(head, 0, offset=start, path=path)
            stream.seek(start + used)
            return check_width(value, self.bits, start)

        def _build(self, obj, stream, context, path):
            if obj is None or obj < 0 or (self.bits and obj >> self.bits):
                raise ConstructError(f"cannot encode {obj!r} as ULEB{self.bits}", path=path)
            stream_write(stream, encode_uleb(obj), len(encode_uleb(obj)), path)
            return obj

        def _sizeof(self, context, path):
            raise SizeofError("ULEB128 has variable size", path=path)

    class Fixed(Construct):
        """A fixed-width field whose truncation is reported like LLVM's DataExtractor."""

        def __init__(self, subcon: Construct) -> None:
            super().__init__()
            self.subcon = subcon
            self.width = subcon.sizeof()

        def _parse(self, stream, context, path):
            start = stream_tell(stream, path)
            data = stream.read(self.width)
            if len(data) != self.width:
                raise MapFault(f"unexpected end of data at offset {start + len(data):#x} "
                               f"while reading [{start:#x}, {start + self.width:#x})", start,
                               path)
            return self.subcon.parse(data)

        def _build(self, obj, stream, context, path):
            data = self.subcon.build(obj)
            stream_write(stream, data, len(data), path)
            return obj

        def _sizeof(self, context, path):
            return self.width

    for cls in (MapFault, ULEB, Fixed):  # named as if declared at module level
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
    return {"MapFault": MapFault, "ULEB": ULEB, "ULEB32": ULEB(32), "ULEB64": ULEB(64),
            "Fixed": Fixed}


CONSTRUCT_TYPES = ("MapFault", "ULEB", "ULEB32", "ULEB64", "Fixed")
__getattr__, _declared = lazy_declarations(globals(), _declare, CONSTRUCT_TYPES)


def map_fault(message: str, offset: int, path: str | None = None) -> Exception:
    """A :class:`MapFault` (a ``construct.ConstructError``), for the plain decoders here."""
    return _declared()["MapFault"](message, offset, path)


__all__ = ["LEB_GROUP_BITS", "LEB_MORE", "LEB_PAYLOAD", "MAX_ULEB_BYTES", "SLEB_SIGN",
           "check_width", "decode_sleb", "decode_uleb", "encode_uleb", "map_fault",
           *CONSTRUCT_TYPES]
