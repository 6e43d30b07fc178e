"""The zstd stream inside PERF_RECORD_COMPRESSED / COMPRESSED2 records.

perf feeds every compressed record of a session to one streaming decompressor, and a
decompressed record may straddle two compressed records (perf keeps ``decomp_last_rem``).
:class:`RecordInflater` does the same: it keeps one ``decompressobj`` (a new one when a
frame ends), returns the carried-over tail plus the new output, and lets the walker hand
back whatever partial record is left.  Output per compressed record is capped, so a
zstd bomb costs a diagnostic, not the machine's memory.
"""

from __future__ import annotations

import zstandard

# perf decompresses each record into an mmap_len buffer (a few hundred KiB); allow far more.
MAX_OUTPUT_PER_RECORD = 64 << 20
_INPUT_SLICE = 2048  # bounds the output of one decompress() call (zstd RLE blocks: 128 KiB/4 B)


class InflateError(Exception):
    """The compressed payload is corrupt or expands beyond the cap."""


class RecordInflater:
    def __init__(self, max_output: int = MAX_OUTPUT_PER_RECORD) -> None:
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self.carry = b""
        self.max_output = max_output

    def inflate(self, payload: bytes | memoryview) -> bytes:
        """Carried-over bytes followed by this payload's output."""
        out = [self.carry]
        total = len(self.carry)
        data = memoryview(payload)
        try:
            while len(data):
                piece, data = data[:_INPUT_SLICE], data[_INPUT_SLICE:]
                chunk = self._obj.decompress(piece)
                while self._obj.eof:
                    rest = self._obj.unused_data
                    self._obj = self._dctx.decompressobj()
                    if not rest:
                        break
                    chunk += self._obj.decompress(rest)
                total += len(chunk)
                if total > self.max_output:
                    raise InflateError(f"decompressed output exceeds {self.max_output} bytes")
                out.append(chunk)
        except zstandard.ZstdError as e:
            self._obj = self._dctx.decompressobj()
            raise InflateError(f"zstd: {e}") from None
        self.carry = b""
        return b"".join(out)

    def keep(self, tail: bytes) -> None:
        """Bytes of a record that continues in the next compressed record."""
        self.carry = bytes(tail)
