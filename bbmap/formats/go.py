"""What the Go toolchain (``gc``: ``cmd/compile`` + ``cmd/link``) writes into an ELF file,
declared once (parse and build).

* ``.note.go.buildid``: an ELF note, owner ``"Go"``, type 4 (``cmd/link``'s
  ``ELF_NOTE_GOBUILDID_TAG``), whose descriptor is the Go build id text with no NUL:
  ``actionID(binary)/actionID(main.a)/contentID(main.a)/contentID(binary)``
  (``cmd/go/internal/work/buildid.go``).  The linker puts the note in the first text page,
  so it is both a ``PT_NOTE`` segment and inside the executable ``PT_LOAD`` (seed 002).
  perf, pprof and the kernel read only the GNU note (``NT_GNU_BUILD_ID``, owner ``"GNU"``),
  which ``cmd/link`` writes only when given ``-B 0x<hex>`` or (Go >= 1.20) ``-B gobuildid``.
* ``.go.buildinfo`` (``runtime/debug.BuildInfo``; ``debug/buildinfo``): a 32-byte header
  ``"\\xff Go buildinf:"``, pointer size, flags; with flag ``FLAG_VERSION_INLINE`` (Go
  1.18+) two uvarint-length-prefixed strings follow: the Go version and the module info
  (``path``/``mod``/``dep``/``build`` lines between two 16-byte sentinels).  Before 1.18
  the header held two pointers to Go string headers instead.
* ``.gopclntab``: the runtime's function table, which ``-ldflags=-s`` keeps (the runtime
  needs it for stack traces) while it drops ``.symtab``.  Go 1.18+ layout (magics
  ``GO118_MAGIC``/``GO120_MAGIC``): a header of eight pointer-sized words, then ``nfunc``
  pairs of u32 (entry offset from the text start, offset of the ``_func`` record from the
  table), then the end offset; a ``_func`` record starts with the u32 entry offset and the
  i32 offset of the NUL-terminated name in the name table.

Sources: the Go 1.19 tree (``src/debug/gosym/pclntab.go``, ``src/debug/buildinfo``,
``src/cmd/link/internal/ld/elf.go``), checked against ``go tool buildid``,
``go version -m`` and the ``.symtab`` of an unstripped build (tests/test_binary_go.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bbmap.formats import lazy_declarations

if TYPE_CHECKING:
    from construct import Struct

# ------------------------------------------------------------ .note.go.buildid
GO_BUILDID_SECTION = ".note.go.buildid"
GO_NOTE_OWNER = b"Go"
NT_GO_BUILD_ID = 4  # cmd/link ELF_NOTE_GOBUILDID_TAG
NOTE_ALIGN = 4  # Go writes its note with 4-byte alignment (sh_addralign 4)
# the four parts of a binary's build id, in order (cmd/go/internal/work/buildid.go)
GO_BUILD_ID_PARTS = ("action_binary", "action_main", "content_main", "content_binary")
GO_BUILD_ID_SEPARATOR = "/"


def note_struct(little: bool) -> Struct:
    """One ELF note (gABI: namesz, descsz, type, name and desc each padded to 4)."""
    from construct import Aligned, Bytes, Int32ub, Int32ul, Struct, this

    u32 = Int32ul if little else Int32ub
    return Struct(
        "namesz" / u32,
        "descsz" / u32,
        "type" / u32,
        "name" / Aligned(NOTE_ALIGN, Bytes(this.namesz)),
        "desc" / Aligned(NOTE_ALIGN, Bytes(this.descsz)),
    )


# ------------------------------------------------------------ .go.buildinfo
GO_BUILDINFO_SECTION = ".go.buildinfo"
BUILDINFO_MAGIC = b"\xff Go buildinf:"
BUILDINFO_HEADER_SIZE = 32
BUILDINFO_ALIGN = 16  # debug/buildinfo searches for the magic at this alignment
FLAG_BIG_ENDIAN = 0x1
FLAG_VERSION_INLINE = 0x2  # Go 1.18+: the strings follow the header
# modinfo is wrapped in these (cmd/go/internal/modload: infoStart/infoEnd)
MODINFO_START = bytes.fromhex("3077af0c9274080241e1c107e6d618e6")
MODINFO_END = bytes.fromhex("f932433186182072008242104116d8f2")


def _declare() -> dict[str, Any]:
    """The module-level declarations (built on first use: see bbmap.formats)."""
    from construct import Const, GreedyBytes, Int8ul, Padding, Prefixed, Struct, VarInt

    header = Struct(
        "magic" / Const(BUILDINFO_MAGIC),
        "ptr_size" / Int8ul,
        "flags" / Int8ul,
        Padding(BUILDINFO_HEADER_SIZE - len(BUILDINFO_MAGIC) - 2),
    )
    # Go 1.18+: header, then the version and the module info, each uvarint-length-prefixed
    inline = Struct(
        "header" / header,
        "version" / Prefixed(VarInt, GreedyBytes),
        "modinfo" / Prefixed(VarInt, GreedyBytes),
    )
    return {"BuildInfoHeader": header, "BuildInfoInline": inline}


CONSTRUCT_TYPES = ("BuildInfoHeader", "BuildInfoInline")
__getattr__, _declared = lazy_declarations(globals(), _declare, CONSTRUCT_TYPES)

# ------------------------------------------------------------ .gopclntab
GO_PCLNTAB_SECTION = ".gopclntab"
GO12_MAGIC = 0xFFFFFFFB  # Go 1.2-1.15
GO116_MAGIC = 0xFFFFFFFA  # Go 1.16-1.17
GO118_MAGIC = 0xFFFFFFF0  # Go 1.18-1.19
GO120_MAGIC = 0xFFFFFFF1  # Go 1.20+ (the _func record gained startLine; what we read is unchanged)
PCLNTAB_MAGICS = {GO12_MAGIC: "go1.2", GO116_MAGIC: "go1.16", GO118_MAGIC: "go1.18",
                  GO120_MAGIC: "go1.20"}
READ_MAGICS = (GO118_MAGIC, GO120_MAGIC)  # the layouts declared below
PCQUANTA = (1, 2, 4)  # instruction size quantum: 1 on x86, 4 on arm64/ppc64
PTR_SIZES = (4, 8)
FUNCTAB_FIELD_SIZE = 4  # Go 1.18+: u32 entry offset and u32 _func offset


def pclntab_header_struct(little: bool, ptr_size: int) -> Struct:
    """The Go 1.18+ header: magic, two zero bytes, quantum, pointer size, eight words.
    Offsets are from the start of the table; ``text_start`` is the link-time address of
    ``runtime.text`` (stored unrelocated in a PIE: take ``.text``'s address instead)."""
    from construct import Const, Int8ul, Int32ub, Int32ul, Int64ub, Int64ul, Struct

    u32 = Int32ul if little else Int32ub
    word = {4: u32, 8: Int64ul if little else Int64ub}[ptr_size]
    return Struct(
        "magic" / u32,
        "pad" / Const(b"\x00\x00"),
        "quantum" / Int8ul,
        "ptr_size" / Int8ul,
        "nfunc" / word,
        "nfiles" / word,
        "text_start" / word,
        "funcname_offset" / word,
        "cu_offset" / word,
        "filetab_offset" / word,
        "pctab_offset" / word,
        "functab_offset" / word,
    )


def functab_struct(little: bool, nfunc: int) -> Struct:
    """``nfunc`` (entry offset, ``_func`` offset) pairs and the end-of-text offset."""
    from construct import Array, Computed, Int32ub, Int32ul, Struct

    u32 = Int32ul if little else Int32ub
    return Struct(
        "entries" / Array(nfunc, Struct("entry_off" / u32, "func_off" / u32)),
        "end_off" / u32,
        "nfunc" / Computed(nfunc),
    )


def func_prefix_struct(little: bool) -> Struct:
    """The first two fields of a Go 1.18+ ``_func`` record (all bbmap needs)."""
    from construct import Int32sb, Int32sl, Int32ub, Int32ul, Struct

    return Struct(
        "entry_off" / (Int32ul if little else Int32ub),
        "name_off" / (Int32sl if little else Int32sb),
    )


def pclntab_header_size(ptr_size: int) -> int:
    return 8 + 8 * ptr_size
