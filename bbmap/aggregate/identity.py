"""Which build a profile recorded, and whether it is the binary given (seed 002).

A profile names the binary it sampled by path, and by GNU build-id when the binary had
one (perf's build-id header and ``--buildid-mmap``).  A Go binary linked without
``-ldflags=-B ...`` has none, and the Go build id never reaches perf.data.  So, to say
whether the binary given to ``annotate`` is the one that was profiled -- and, when it is
not, to show both builds' ids -- this module finds the profiled build's bytes:

* by the recorded GNU build-id, in build-id directories: ``--debug-dir`` ones, perf's
  build-id cache (``$PERF_BUILDID_DIR`` or ``~/.debug``: ``.build-id/xx/rest`` is a link
  to a directory holding ``elf``, a copy ``perf record`` keeps unless given ``-N``) and
  ``/usr/lib/debug`` (``.build-id/xx/rest.debug``);
* at the recorded path, if a file is there: the build-id it holds tells whether it is
  the recorded build; without build-ids, the inode the MMAP2 record carries tells whether
  it is still the file that was mapped.

What is found is evidence for :mod:`bbmap.aggregate.explain`, which words the messages.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

from bbmap.buildid import build_ids_match
from bbmap.errors import BBMapError

DEFAULT_BUILD_ID_DIRS = ("/usr/lib/debug",)


def perf_buildid_dir() -> str:
    """perf's build-id cache (``buildid.dir`` in perfconfig is not read)."""
    return os.environ.get("PERF_BUILDID_DIR") or os.path.join(os.path.expanduser("~"),
                                                             ".debug")


@dataclass
class ProfiledFile:
    """A file the profile mapped as the binary (or would have, but for its build-id)."""

    filename: str  # as the profile names it
    recorded_build_id: str | None = None  # GNU build-id recorded for it
    inode: tuple[int, int, int, int] | None = None  # (maj, min, ino, generation), MMAP2
    # the profiled build, when its bytes were found for sure
    found_at: str | None = None  # where, worded for a message
    build_id: str | None = None  # GNU build-id of those bytes
    go_build_id: str | None = None
    go_version: str | None = None
    # the recorded path as it is now
    path_is_the_binary: bool = False  # the recorded path is the very file given
    path_go_build_id: str | None = None  # Go build id of the file there now
    path_build_id: str | None = None
    inode_now: str | None = None  # the file at the recorded path: "same" | "replaced"
    binary_is_mapped_file: bool = False  # the binary given has the recorded inode

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in (
            "filename", "recorded_build_id", "found_at", "build_id", "go_build_id",
            "go_version", "path_is_the_binary", "path_build_id", "path_go_build_id",
            "inode_now", "binary_is_mapped_file")}


def _same_inode(st: os.stat_result, inode: tuple[int, int, int, int]) -> bool | None:
    """None when the device differs (another machine, another file system)."""
    maj, mnr, ino, _gen = inode
    if (os.major(st.st_dev), os.minor(st.st_dev)) != (maj, mnr):
        return None
    return st.st_ino == ino


def resolve(files: list[ProfiledFile], binary_path: str, debug_dirs=(),
            loaded: Any = None) -> None:
    """Fill what can be found of each profiled file (in place); never raises.  ``loaded``:
    the binary the run opened, read again only through this object (a profile recorded
    from the binary's own path does not open it a second time)."""
    dirs = [*debug_dirs, perf_buildid_dir(), *DEFAULT_BUILD_ID_DIRS]
    for pf in files:
        path = pf.filename
        if pf.inode is not None:
            with contextlib.suppress(OSError):
                pf.binary_is_mapped_file = bool(_same_inode(os.stat(binary_path), pf.inode))
        on_disk = os.path.isabs(path) and os.path.isfile(path)
        if on_disk:
            try:
                pf.path_is_the_binary = os.path.samefile(path, binary_path)
                if pf.inode is not None:
                    same = _same_inode(os.stat(path), pf.inode)
                    pf.inode_now = None if same is None else ("same" if same else "replaced")
            except OSError:
                pass
            got = None
            if loaded is not None and pf.path_is_the_binary:
                with contextlib.suppress(BBMapError, OSError):
                    got = _ids(loaded)
            else:
                got = _identity(path)
            if got is not None:
                pf.path_build_id, pf.path_go_build_id, go_version = got
                sure = (build_ids_match(pf.path_build_id, pf.recorded_build_id)
                        if pf.recorded_build_id else pf.inode_now == "same")
                if sure:
                    pf.found_at = f"the recorded path {path}"
                    pf.build_id, pf.go_build_id, pf.go_version = got
        if pf.found_at is None and pf.recorded_build_id:
            bid = pf.recorded_build_id.lower()
            for d in dirs:
                label = ("perf's build-id cache" if d == perf_buildid_dir()
                         else f"build-id directory {d}")
                for c in (os.path.join(d, ".build-id", bid[:2], bid[2:], "elf"),
                          os.path.join(d, ".build-id", bid[:2], bid[2:] + ".debug"),
                          os.path.join(d, ".build-id", bid[:2], bid[2:])):
                    got = _identity(c) if os.path.isfile(c) else None
                    if got is not None and build_ids_match(got[0], bid):
                        pf.found_at = f"{label}, {c}"
                        pf.build_id, pf.go_build_id, pf.go_version = got
                        break
                if pf.found_at:
                    break


def _identity(path: str) -> tuple[str | None, str | None, str | None] | None:
    from bbmap.binary import load_binary

    try:
        with load_binary(path) as b:
            return _ids(b)
    except (BBMapError, OSError):
        return None


def _ids(b: Any) -> tuple[str | None, str | None, str | None]:
    """A binary's build-id, Go build id and Go version."""
    go = b.go
    return b.build_id, go.build_id if go else None, go.version if go else None


def go_ids_text(pf: ProfiledFile, binary_name: str, binary_go_id: str | None) -> str:
    """``Go build ids: profiled X (found at ...), BINARY Y: what differs``."""
    if pf.go_build_id is None and binary_go_id is None:
        return ""
    from bbmap.binary.go import compare_go_build_ids  # Go's wording: Go binaries only

    if pf.found_at is None:
        where = (" (recorded by perf, which keeps a copy in its build-id cache unless "
                 "recording with -N; pass --debug-dir with a .build-id/ tree holding it)"
                 if pf.recorded_build_id else "")
        return (f"Go build ids: profiled build not found{where}, {binary_name} "
                f"{binary_go_id or '(none)'}")
    return (f"Go build ids: profiled {pf.go_build_id or '(none)'} (read from "
            f"{pf.found_at}), {binary_name} {binary_go_id or '(none)'}: "
            f"{compare_go_build_ids(pf.go_build_id, binary_go_id)}")
