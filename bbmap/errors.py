"""Errors and warnings that name where trust ends: file, section, byte offset.

Bad input never escapes as a traceback: every layer raises :class:`BBMapError` (or
records a :class:`Diagnostic`) and the CLI prints ``str(error)`` on one line and
exits non-zero.  Decoders keep what they decoded before a fault and attach the
fault as a diagnostic, so callers can show partial results *and* fail.
"""

from __future__ import annotations

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
