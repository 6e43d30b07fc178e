"""Readers over ELF files: sections, segments, symbols, build-id and block maps."""

from bbmap.binary.elf import Binary, load_binary

__all__ = ["Binary", "load_binary"]
