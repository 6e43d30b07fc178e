"""A Go program's identity and function table, read beside the GNU build-id (seed 002).

A binary from the Go toolchain (``gc``) carries two identities: the Go build id in
``.note.go.buildid`` (always; the go command's cache key for the binary) and, only when
linked with ``-ldflags=-B 0x<hex>`` or (Go >= 1.20) ``-B gobuildid``, a GNU build-id.
perf, pprof and the kernel know only the GNU one, so a plain ``go build`` is matched to
its profiles by path alone.  This module reads the Go side (layouts declared in
:mod:`bbmap.formats.go`), says what the Go build id's four parts tell about two builds,
and words the two Go-specific explanations bbmap gives: why there is no block map, and
which flag makes matching exact.

It also reads the runtime's function table (``.gopclntab``), which ``-ldflags=-s`` keeps:
a stripped Go binary still has every function's name and extent, so bbmap can attribute
samples by function where ``perf report`` shows only addresses.  The table is read with
numpy (:func:`pclntab_functions`); the tests hold it equal to a record-by-record read
with the construct declarations (``tests/oracles/pclntab_ref.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from construct import ConstructError

from bbmap.binary.types import FunctionSymbols
from bbmap.errors import Diagnostics
from bbmap.formats.elf import PF_W, PF_X, PT_LOAD, PT_NOTE, SHT_NOTE
from bbmap.formats.go import (
    BUILDINFO_ALIGN,
    BUILDINFO_HEADER_SIZE,
    BUILDINFO_MAGIC,
    FLAG_VERSION_INLINE,
    FUNCTAB_FIELD_SIZE,
    GO_BUILD_ID_PARTS,
    GO_BUILD_ID_SEPARATOR,
    GO_BUILDINFO_SECTION,
    GO_NOTE_OWNER,
    GO_PCLNTAB_SECTION,
    MODINFO_END,
    MODINFO_START,
    NT_GO_BUILD_ID,
    PCLNTAB_MAGICS,
    PCQUANTA,
    PTR_SIZES,
    READ_MAGICS,
    BuildInfoHeader,
    BuildInfoInline,
    note_struct,
    pclntab_header_size,
    pclntab_header_struct,
)

# ``-B gobuildid`` arrived in Go 1.20 (cmd/link: "-B argument must start with 0x" before)
GOBUILDID_SINCE = (1, 20)
# Go toolchains built on LLVM, which can emit .llvm_bb_addr_map (the gc compiler has its
# own back end, gccgo is GCC's: neither emits one)
LLVM_GO_TOOLCHAINS = "gollvm (llvm-goc) or TinyGo"


@dataclass
class GoBuildInfo:
    """``runtime/debug.BuildInfo`` as ``go version -m`` prints it."""

    version: str  # "go1.19.8"
    path: str | None = None  # the main package path
    main: tuple[str, str, str] | None = None  # (module path, version, sum)
    deps: list[tuple[str, str, str]] = field(default_factory=list)
    settings: list[tuple[str, str]] = field(default_factory=list)  # "build" lines, in order
    inline: bool = True  # the Go 1.18+ layout

    def setting(self, key: str) -> str | None:
        return next((v for k, v in self.settings if k == key), None)

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "path": self.path,
                "main": list(self.main) if self.main else None,
                "deps": [list(d) for d in self.deps],
                "settings": dict(self.settings)}


@dataclass
class GoFunctions:
    """The runtime function table: names and [address, address + size) by address."""

    address: np.ndarray  # u8, ELF vaddrs
    size: np.ndarray  # u8
    names: list[str]
    magic: int
    section: int  # section index of .gopclntab

    def __len__(self) -> int:
        return len(self.address)

    def as_symbols(self, text_section: int) -> FunctionSymbols:
        return FunctionSymbols(address=self.address.copy(), size=self.size.copy(),
                               section=np.full(len(self), text_section, "i4"),
                               names=list(self.names), display=list(self.names),
                               is_func=np.ones(len(self), "?"))


@dataclass
class GoInfo:
    """What a Go binary says about itself (``Binary.go``)."""

    build_id: str | None  # the .note.go.buildid text
    build_info: GoBuildInfo | None
    functions: GoFunctions | None
    pclntab_magic: int | None = None
    diagnostics: Diagnostics = field(default_factory=Diagnostics)

    @property
    def version(self) -> str | None:
        return self.build_info.version if self.build_info else None

    @property
    def compiler(self) -> str:
        """``gc`` unless the build info says otherwise (``-compiler=gccgo``)."""
        c = self.build_info.setting("-compiler") if self.build_info else None
        return c or "gc"

    @property
    def build_id_parts(self) -> dict[str, str] | None:
        return split_go_build_id(self.build_id)

    def to_json(self, gnu_build_id: str | None = None) -> dict[str, Any]:
        return {"build_id": self.build_id, "build_id_parts": self.build_id_parts,
                "version": self.version, "compiler": self.compiler,
                "build_info": self.build_info.to_json() if self.build_info else None,
                "pclntab": None if self.pclntab_magic is None else {
                    "magic": f"{self.pclntab_magic:#x}",
                    "layout": PCLNTAB_MAGICS.get(self.pclntab_magic, "unknown"),
                    "functions": len(self.functions) if self.functions is not None else None},
                "gnu_build_id_flag": None if gnu_build_id else exact_match_flag(self)}

    def summary(self) -> str:
        """One line: ``Go build id X (go1.19.8 gc, module M)``."""
        bits = [self.version or "version unknown", self.compiler]
        bi = self.build_info
        if bi and bi.path:
            bits.append(bi.path)
        return f"Go build id {self.build_id or '(none)'} ({', '.join(bits)})"


# ---------------------------------------------------------------- reading
def read_go(binary: Any) -> GoInfo | None:
    """The Go identity of ``binary`` (a :class:`~bbmap.binary.Binary`); None for a binary
    the Go toolchain did not make (no Go note, build info or function table)."""
    diags = Diagnostics()
    bid = _go_note(binary, diags)
    info = _build_info(binary, diags)
    if bid is None and info is None and not _sections_named(binary, GO_PCLNTAB_SECTION):
        return None  # not Go: no symbol look-ups or segment searches for the table
    funcs, magic = _functions(binary, diags)
    return GoInfo(build_id=bid, build_info=info, functions=funcs, pclntab_magic=magic,
                  diagnostics=diags)


def _sections_named(binary: Any, name: str) -> list:
    return [s for s in binary.sections if s.name == name]


def _go_note(binary: Any, diags: Diagnostics) -> str | None:
    """The Go build id from the note sections, or the PT_NOTE segments without them."""
    st = note_struct(binary.little_endian)
    blobs: list[tuple[str, bytes]] = []
    secs = [s for s in binary.sections if s.sh_type == SHT_NOTE]
    if secs:
        for s in secs:
            try:
                blobs.append((binary.section_label(s.index), binary.section_data(s.index)))
            except Exception as e:  # noqa: BLE001 - a damaged section: said, others read
                diags.warn(f"unreadable note section: {e}", file=binary.path)
    else:
        for i, g in enumerate(binary.segments):
            if g.p_type == PT_NOTE:
                blobs.append((f"PT_NOTE segment [{i}]",
                              binary.read(g.p_offset, g.p_filesz)))
    for where, data in blobs:
        pos = 0
        while pos + 12 <= len(data):
            try:
                n = st.parse(data[pos:])
            except ConstructError:
                diags.warn("truncated note", file=binary.path, section=where, offset=pos)
                break
            if n.name.rstrip(b"\0") == GO_NOTE_OWNER and n.type == NT_GO_BUILD_ID:
                try:
                    return n.desc.rstrip(b"\0").decode("ascii")
                except UnicodeDecodeError:
                    diags.warn("the Go build-id note is not ASCII text", file=binary.path,
                               section=where, offset=pos)
                    return None
            pos += len(st.build(n))
    return None


def _build_info(binary: Any, diags: Diagnostics) -> GoBuildInfo | None:
    """``.go.buildinfo``, or (no section headers) the first writable PT_LOAD searched for
    the magic at 16-byte alignment, as ``debug/buildinfo`` does."""
    secs = _sections_named(binary, GO_BUILDINFO_SECTION)
    if secs:
        s = secs[0]
        where = binary.section_label(s.index)
        try:
            data = binary.section_data(s.index)
        except Exception as e:  # noqa: BLE001
            diags.warn(f"unreadable: {e}", file=binary.path, section=where)
            return None
        start = 0 if data.startswith(BUILDINFO_MAGIC) else -1
    else:
        segs = [g for g in binary.segments if g.p_type == PT_LOAD and g.p_flags & PF_W]
        if not segs:
            return None
        g = segs[0]
        where = "first writable PT_LOAD"
        data = binary.read(g.p_offset, g.p_filesz)
        start = -1
        pos = data.find(BUILDINFO_MAGIC)
        while pos >= 0:
            if pos % BUILDINFO_ALIGN == 0:
                start = pos
                break
            pos = data.find(BUILDINFO_MAGIC, pos + 1)
        if start < 0:
            return None
    if start < 0:
        diags.warn("no Go build info magic at the section start", file=binary.path,
                   section=where, offset=0)
        return None
    body = data[start:]
    try:
        hdr = BuildInfoHeader.parse(body)
    except ConstructError:
        diags.warn("Go build info header truncated", file=binary.path, section=where,
                   offset=start)
        return None
    if not hdr.flags & FLAG_VERSION_INLINE:
        diags.warn(f"Go build info in the pre-1.18 pointer layout (flags {hdr.flags:#x}) "
                   "is not read: the Go version and module are not shown", file=binary.path,
                   section=where, offset=start)
        return None
    try:
        bi = BuildInfoInline.parse(body)
    except ConstructError:
        diags.warn("Go build info strings run past the section end", file=binary.path,
                   section=where, offset=start + BUILDINFO_HEADER_SIZE)
        return None
    return parse_modinfo(bi.version.decode("utf-8", "replace"), bi.modinfo)


def parse_modinfo(version: str, modinfo: bytes) -> GoBuildInfo:
    """The ``path``/``mod``/``dep``/``=>``/``build`` lines between the two sentinels."""
    if (len(modinfo) >= len(MODINFO_START) + len(MODINFO_END)
            and modinfo.startswith(MODINFO_START) and modinfo.endswith(MODINFO_END)):
        modinfo = modinfo[len(MODINFO_START):-len(MODINFO_END)]
    out = GoBuildInfo(version=version)
    last: list | None = None
    for line in modinfo.decode("utf-8", "replace").splitlines():
        kind, _, rest = line.partition("\t")
        cols = rest.split("\t")
        if kind == "path":
            out.path = rest
        elif kind in ("mod", "dep"):
            mod = (cols + ["", "", ""])[:3]
            if kind == "mod":
                out.main = (mod[0], mod[1], mod[2])
            else:
                out.deps.append((mod[0], mod[1], mod[2]))
                last = out.deps
        elif kind == "=>" and last:  # a replacement of the dep above
            p, v, s = (cols + ["", "", ""])[:3]
            last[-1] = (f"{last[-1][0]} => {p}", v, s)
        elif kind == "build":
            k, _, v = rest.partition("=")
            out.settings.append((k, v.strip('"') if v.startswith('"') else v))
    return out


def _functions(binary: Any, diags: Diagnostics) -> tuple[GoFunctions | None, int | None]:
    found = _locate_pclntab(binary, diags)
    if found is None:
        return None, None
    data, where, index = found
    order = "little" if binary.little_endian else "big"
    magic = int.from_bytes(data[:4], order)
    if magic not in PCLNTAB_MAGICS:
        diags.warn(f"unknown function table magic {magic:#x}", file=binary.path,
                   section=where, offset=0)
        return None, None
    if magic not in READ_MAGICS:
        diags.warn(f"function table of {PCLNTAB_MAGICS[magic]}-1.17 (magic {magic:#x}) is "
                   "not read: function names come from .symtab only", file=binary.path,
                   section=where, offset=0)
        return None, magic
    try:
        f = pclntab_functions(data, binary.little_endian, _text_start(binary, data))
    except (PclntabError, ConstructError) as e:
        if not isinstance(e, PclntabError):
            e = PclntabError(f"function table: {e}", 0)
        diags.warn(str(e), file=binary.path, section=where, offset=e.offset)
        return None, magic
    return GoFunctions(address=f[0], size=f[1], names=f[2], magic=magic,
                       section=index), magic


def _locate_pclntab(binary: Any, diags: Diagnostics) -> tuple[bytes, str, int] | None:
    """(bytes, where, section index or -1): the ``.gopclntab`` section; else (PIE and
    external linking put the table inside ``.data.rel.ro``) the range between the
    ``runtime.pclntab`` and ``runtime.epclntab`` symbols; else a search of the read-only
    and RELRO data for a header that holds together (a stripped PIE)."""
    secs = _sections_named(binary, GO_PCLNTAB_SECTION)
    if secs:
        s = secs[0]
        where = binary.section_label(s.index)
        try:
            return binary.section_data(s.index), where, s.index
        except Exception as e:  # noqa: BLE001
            diags.warn(f"unreadable: {e}", file=binary.path, section=where)
            return None
    lo, hi = _symbol_value(binary, "runtime.pclntab"), _symbol_value(binary, "runtime.epclntab")
    if lo is not None and hi is not None and hi > lo:
        data = _read_vaddr(binary, lo, hi - lo)
        if data is not None:
            return data, f"runtime.pclntab at {lo:#x}", -1
    return _search_pclntab(binary)


def _symbol_value(binary: Any, name: str) -> int | None:
    want = b"\0" + name.encode() + b"\0"
    for t in binary.symbol_tables:
        pos = t.strtab.find(want)
        while pos >= 0:
            hit = np.flatnonzero(t.name_off == pos + 1)
            if len(hit):
                return int(t.value[hit[0]])
            pos = t.strtab.find(want, pos + 1)
    return None


def _read_vaddr(binary: Any, vaddr: int, size: int) -> bytes | None:
    for g in binary.segments:
        if g.p_type == PT_LOAD and g.p_vaddr <= vaddr and vaddr + size <= g.p_vaddr + g.p_filesz:
            off = g.p_offset + vaddr - g.p_vaddr
            return binary.read(off, size)
    return None


def _search_pclntab(binary: Any) -> tuple[bytes, str, int] | None:
    order = "little" if binary.little_endian else "big"
    magics = [m.to_bytes(4, order) for m in READ_MAGICS]
    for i, g in enumerate(binary.segments):
        if g.p_type != PT_LOAD or g.p_flags & PF_X or not g.p_filesz:
            continue
        seg = binary.read(g.p_offset, g.p_filesz)
        for magic in magics:
            pos = seg.find(magic)
            while pos >= 0:
                if pos % 4 == 0 and _plausible_header(seg[pos:], binary.little_endian):
                    return seg[pos:], f"PT_LOAD [{i}] +{pos:#x}", -1
                pos = seg.find(magic, pos + 1)
    return None


def _plausible_header(data: bytes, little: bool) -> bool:
    """A header whose tables lie inside the data and whose first function starts at
    offset 0 of the text (``runtime.text`` is the first function)."""
    try:
        h = _header(data, little)
    except (PclntabError, ConstructError):
        return False
    if not 0 < h.nfunc < 1 << 24 or h.funcname_offset < pclntab_header_size(h.ptr_size):
        return False
    first = int.from_bytes(data[h.functab_offset:h.functab_offset + 4],
                           "little" if little else "big")
    return first == 0


def _text_start(binary: Any, data: bytes) -> int | None:
    """The address function entry offsets count from: the header's ``text_start``
    (``runtime.text``, which external linking places after the C start-up code, so it is
    not always ``.text``'s address); where that word is 0 (left to a dynamic relocation),
    the ``runtime.text`` symbol or ``.text``'s address."""
    h = _header(data, binary.little_endian)
    if h.text_start:
        return None  # pclntab_functions takes the header's
    sym = _symbol_value(binary, "runtime.text")
    if sym is not None:
        return sym
    text = _sections_named(binary, ".text")
    return text[0].sh_addr if text else 0


# ---------------------------------------------------------------- .gopclntab
class PclntabError(ValueError):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def _header(data: bytes, little: bool):  # noqa: ANN202 - a construct Container
    if len(data) < 8 or data[6] not in PCQUANTA or data[7] not in PTR_SIZES:
        raise PclntabError("function table header: bad quantum or pointer size", 6)
    if data[4:6] != b"\0\0":
        raise PclntabError("function table header: bytes 4-5 are not zero", 4)
    ptr = data[7]
    if len(data) < pclntab_header_size(ptr):
        raise PclntabError("function table shorter than its header", 0)
    try:
        h = pclntab_header_struct(little, ptr).parse(data)
    except ConstructError as e:
        raise PclntabError(f"function table header: {e}", 0) from None
    end = h.functab_offset + (2 * h.nfunc + 1) * FUNCTAB_FIELD_SIZE
    if h.functab_offset > len(data) or end > len(data):
        raise PclntabError(f"{h.nfunc} functions run past the table end ({end:#x} > "
                           f"{len(data):#x})", h.functab_offset)
    if h.funcname_offset > len(data):
        raise PclntabError("name table offset past the table end", 8 + 3 * ptr)
    return h


def pclntab_functions(data: bytes, little: bool, text_addr: int | None = None
                      ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(address u8, size u8, names) of a Go 1.18+ function table, vectorized.

    ``text_addr``: where entry offsets count from, when the header's ``text_start``
    cannot be used (see :func:`_text_start`); the header's value when None.
    """
    h = _header(data, little)
    n = int(h.nfunc)
    e = "<" if little else ">"
    tab = np.frombuffer(data, f"{e}u4", count=2 * n + 1, offset=h.functab_offset)
    entry = tab[0:2 * n:2].astype(np.uint64)
    end = int(tab[2 * n])
    func_off = tab[1:2 * n:2].astype(np.int64) + h.functab_offset
    if n and (func_off.max() + 8 > len(data)):
        bad = int(np.argmax(func_off + 8 > len(data)))
        raise PclntabError(f"function {bad}'s record lies past the table end",
                           h.functab_offset + (2 * bad + 1) * FUNCTAB_FIELD_SIZE)
    if n and (np.any(entry[1:] < entry[:-1]) or int(entry[-1]) > end):
        raise PclntabError("function entries are not in address order", h.functab_offset)
    raw = np.frombuffer(data, np.uint8)
    name_off = _gather_i32(raw, func_off + 4, little) + h.funcname_offset
    names = _c_strings(data, raw, name_off, h.functab_offset)
    base = h.text_start if text_addr is None else text_addr
    address = entry + np.uint64(base)
    size = np.diff(np.append(entry, np.uint64(end)))
    return address, size.astype(np.uint64), names


def _gather_i32(raw: np.ndarray, at: np.ndarray, little: bool) -> np.ndarray:
    b = raw[at[:, None] + np.arange(4)].astype(np.int64)
    if not little:
        b = b[:, ::-1]
    v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16) | (b[:, 3] << 24)
    return np.where(v >= 1 << 31, v - (1 << 32), v)


def _c_strings(data: bytes, raw: np.ndarray, starts: np.ndarray, where: int) -> list[str]:
    if not len(starts):
        return []
    if starts.min() < 0 or starts.max() >= len(data):
        bad = int(np.argmax((starts < 0) | (starts >= len(data))))
        raise PclntabError(f"function {bad}'s name lies outside the table", where)
    nul = np.flatnonzero(raw == 0)
    k = np.searchsorted(nul, starts)
    if np.any(k >= len(nul)):
        raise PclntabError("a function name runs to the table end without a NUL", where)
    ends = nul[k]
    return [data[a:b].decode("utf-8", "replace") for a, b in zip(starts.tolist(), ends.tolist())]



# ---------------------------------------------------------------- build ids
def split_go_build_id(bid: str | None) -> dict[str, str] | None:
    """The four parts of a binary's Go build id, or None when it has another shape (a
    package's two-part id, or a value set with ``-ldflags=-buildid=...``)."""
    if not bid:
        return None
    parts = bid.split(GO_BUILD_ID_SEPARATOR)
    if len(parts) != len(GO_BUILD_ID_PARTS):
        return None
    return dict(zip(GO_BUILD_ID_PARTS, parts))


def compare_go_build_ids(a: str | None, b: str | None) -> str:
    """What differs between two builds, read from their Go build ids' parts."""
    if not a or not b:
        return "one of the two has no Go build id"
    if a == b:
        return "the same Go build id: the same build"
    pa, pb = split_go_build_id(a), split_go_build_id(b)
    if pa is None or pb is None:
        return "the Go build ids differ (one is not the go command's four-part id)"
    if pa["content_binary"] == pb["content_binary"]:
        return ("the same binary content with different link inputs (the content part of "
                "the Go build ids is equal)")
    if pa["content_main"] != pb["content_main"]:
        return ("the main package was compiled differently (its Go build id parts differ): "
                "the source or the compile flags changed")
    return ("the main package compiled the same, the link differs (linker flags, "
            "dependencies or toolchain)")


def go_version_tuple(version: str | None) -> tuple[int, int] | None:
    m = re.match(r"go(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def exact_match_flag(go: GoInfo | None) -> str:
    """The link flag that gives this Go binary a GNU build-id (what perf keys by)."""
    v = go_version_tuple(go.version) if go else None
    if v is not None and v < GOBUILDID_SINCE:
        return (f"-ldflags=-B 0x<hex> (a hash of the sources, say; -B gobuildid needs Go "
                f"1.20, this is {go.version})")
    return "-ldflags=-B gobuildid (Go 1.20+; -B 0x<hex> before)"


def go_identity_line(go: GoInfo, gnu_build_id: str | None) -> str:
    """One line for dump / lookup / perf-info: both identities and what follows."""
    line = go.summary()
    if gnu_build_id:
        return f"{line}; GNU build-id {gnu_build_id}"
    return (f"{line}; no GNU build-id: perf and pprof match it to a profile by path only; "
            f"link with {exact_match_flag(go)} to match exactly")


def no_block_map_reason(go: GoInfo) -> str:
    """Why a Go binary has no block map and what would give one (callers add what still
    holds: per-function counts)."""
    who = f"the Go {go.compiler} compiler" + (f" ({go.version})" if go.version else "")
    if go.compiler == "gccgo":
        why = "GCC's back end emits no .llvm_bb_addr_map"
    else:
        why = ("its own back end (not LLVM) emits no .llvm_bb_addr_map and has no flag for "
               "one")
    return (f"built by {who}: {why}; only a Go toolchain built on LLVM ({LLVM_GO_TOOLCHAINS}, "
            "through LLVM's basic-block-address-map code generation) could give blocks")
