"""Errors and warnings that name where trust ends: file, section, byte offset.

Bad input never escapes as a traceback: every layer raises :class:`BBMapError` (or
records a :class:`Diagnostic`) and the CLI prints ``str(error)`` on one line and
exits non-zero.  Decoders keep what they decoded before a fault and attach the
fault as a diagnostic, so callers can show partial results *and* fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in an input, located as precisely as the layer knows."""

    message: str
    file: str | None = None
    section: str | None = None  # ELF section ("section [29] .llvm_bb_addr_map") or perf part
    offset: int | None = None  # byte offset inside the section (or the file)
    severity: str = "warning"  # "warning" | "error"

    def __str__(self) -> str:
        where = []
        if self.file:
            where.append(self.file)
        if self.section:
            where.append(self.section)
        if self.offset is not None:
            where.append(f"offset {self.offset:#x}")
        prefix = ": ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message

    def to_json(self) -> dict:
        d = {"severity": self.severity, "message": self.message}
        if self.file:
            d["file"] = self.file
        if self.section:
            d["section"] = self.section
        if self.offset is not None:
            d["offset"] = self.offset
        return d


class BBMapError(Exception):
    """A fault in an input (or a request) that the user must see, in one line."""

    def __init__(self, message: str, *, file: str | None = None, section: str | None = None,
                 offset: int | None = None) -> None:
        self.diagnostic = Diagnostic(message, file, section, offset, "error")
        super().__init__(str(self.diagnostic))


class UsageError(BBMapError):
    """The request itself is wrong (arguments in the wrong order, a malformed address):
    the CLI exits 2, as for click's own usage errors."""


class DecodeError(BBMapError):
    """A block map or perf record could not be decoded past ``offset``."""


@dataclass
class Diagnostics:
    """An ordered collection of diagnostics carried beside a result."""

    items: list[Diagnostic] = field(default_factory=list)

    def warn(self, message: str, **where) -> Diagnostic:
        d = Diagnostic(message, severity="warning", **where)
        self.items.append(d)
        return d

    def error(self, message: str, **where) -> Diagnostic:
        d = Diagnostic(message, severity="error", **where)
        self.items.append(d)
        return d

    def add(self, d: Diagnostic) -> None:
        self.items.append(d)

    def extend(self, other: Diagnostics | list[Diagnostic]) -> None:
        self.items.extend(other.items if isinstance(other, Diagnostics) else other)

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.items)

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


# Exceptions libraries raise while decoding bytes (pyelftools, construct, struct, numpy
# conversions): on bad input they mean "this structure is not what its fields claim".
# Named, not imported, so that this module stays free of heavy imports.
DECODING_EXCEPTIONS = (OverflowError, ValueError, IndexError, KeyError, UnicodeDecodeError,
                       AssertionError, ArithmeticError, EOFError)
_LIBRARY_ERROR_NAMES = {"ConstructError", "ELFError", "ELFParseError", "DWARFError", "error",
                        "ArrayError", "FieldError", "RangeError", "SizeofError",
                        "StreamError", "MappingError", "SwitchError", "SelectError",
                        "TerminatedError", "ExplicitError", "CheckError", "PaddingError",
                        "StringError", "ChecksumError", "ValidationError", "IntegerError",
                        "FormatFieldError", "AdaptationError", "ZstdError"}


def is_decoding_error(e: BaseException) -> bool:
    """Whether ``e`` is what a library raises on bytes that are not what they claim
    (rather than a bug of ours we would want reported): construct/pyelftools/struct/zlib
    errors, and the overflows and value errors a wild size or offset field provokes."""
    if isinstance(e, BBMapError):
        return False
    if isinstance(e, DECODING_EXCEPTIONS):
        return True
    return any(c.__name__ in _LIBRARY_ERROR_NAMES and c.__module__.split(".")[0] in
               ("construct", "elftools", "struct", "zlib", "zstandard", "zstd", "_struct")
               for c in type(e).__mro__)


def library_words(e: BaseException) -> str:
    """What a library's decoding exception means, in bbmap's words: no construct parse
    paths ("Error in path (parsing) -> _peek"), no C types ("C ssize_t").  A construct
    ``ValidationError`` carries a message bbmap's own declarations wrote: kept."""
    import re

    if isinstance(e, OverflowError):
        return "a size, offset or count field is too large to be real"
    if isinstance(e, MemoryError):
        return "a size field asks for more memory than the input can hold"
    name = type(e).__name__
    lines = str(e).splitlines()
    if lines and lines[0].startswith("Error in path"):
        lines = lines[1:]
    text = " ".join(x.strip() for x in lines)
    if name in ("ValidationError", "ExplicitError") and text:
        return text  # written by bbmap.formats (Check / Error with a message)
    m = re.search(r"expected (\d+), found (\d+)", text)
    if m:
        return (f"cut short: a structure needs {m.group(1)} bytes, only {m.group(2)} are "
                "there")
    if name == "ELFError" and text and "->" not in text and "ssize_t" not in text:
        return text  # pyelftools' own sentences name the ELF field ("Expected sh_entsize...")
    if name in ("ELFParseError", "StreamError", "FieldError", "ArrayError", "error",
                "EOFError", "StreamError") or "stream" in text.lower():
        return "a structure runs past the end of its data"
    if isinstance(e, UnicodeDecodeError):
        return "a name is not valid text"
    if name in ("ConstError", "MappingError", "SwitchError", "RangeError"):
        return "a field holds a value no valid file has"
    if isinstance(e, (ValueError, IndexError, KeyError, ArithmeticError)):
        return "a field holds a value no valid file has"
    return "a structure could not be decoded"


@contextmanager
def decoding(file: str | None = None, section: str | None = None,
             offset: int | None = None, what: str = "cannot decode") -> Iterator[None]:
    """Turn a library's decoding exception raised inside into a :class:`BBMapError`
    naming ``file``, ``section`` and ``offset`` (the generic guard at every decoder
    boundary; a specific check before the library call gives a better message)."""
    try:
        yield
    except BBMapError:
        raise
    except MemoryError as e:
        raise BBMapError(f"{what}: {library_words(e)}", file=file, section=section,
                         offset=offset) from None
    except Exception as e:
        if not is_decoding_error(e):
            raise
        raise DecodeError(f"{what}: {library_words(e)}", file=file, section=section,
                          offset=offset) from None
