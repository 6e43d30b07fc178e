"""``bbmap dump BINARY``: every function, range and block of the binary's block maps."""

from __future__ import annotations

import sys
from typing import IO

import click

from bbmap.atomic import atomic_open
from bbmap.cli import EXIT_OK, EXIT_PROBLEMS, allow_quick_exit, guarded, main
from bbmap.cli.options import debug_dir_option, output_option


@main.command("dump", short_help="Print every function, range and block of the block maps.")
@click.argument("binary")
@click.option("--json", "as_json", is_flag=True,
              help="JSON (shape: spec/dump-json.md); default with -o NAME.json")
@click.option("--no-demangle", is_flag=True, help="Show raw (mangled) symbol names.")
@output_option()
@debug_dir_option()
@click.option("--decoder", type=click.Choice(["fast", "ref"]), default="fast", hidden=True,
              help="Map decoder: fast path or the construct reference.")
@guarded
def dump_cmd(binary: str, as_json: bool, no_demangle: bool, output: str | None,
             debug_dirs: tuple[str, ...], decoder: str) -> None:
    """Decode every basic-block address map in BINARY (map sections, .bb_info, labels).

    \b
    Example:
      bbmap dump ./app --json -o map.json
    """
    import gc

    # A dump makes millions of objects that all live until the output is written, and no
    # cycles worth collecting: the collector's passes over them (and over the modules
    # being imported) cost ~6 % of a 20,000-function dump's CPU and ~10 % of a
    # 100,000-function one's).  Restored for library and
    # test callers.
    collecting = gc.isenabled()
    gc.disable()
    from bbmap.memory import keep_freed_memory

    # The decoder's and the writer's multi-MB temporaries reuse freed heap instead of
    # fresh pages: 17.4k -> 13.7k page faults and ~6 ms of a 20,000-function dump.
    keep_freed_memory()
    try:
        _dump(binary, as_json, no_demangle, output, debug_dirs, decoder)
    finally:
        if collecting:
            gc.enable()


def _dump(binary: str, as_json: bool, no_demangle: bool, output: str | None,
          debug_dirs: tuple[str, ...], decoder: str) -> None:
    from bbmap.cli.options import json_from_output

    as_json = json_from_output(as_json, output)
    from bbmap.binary import load_binary
    from bbmap.dump import iter_text, write_json, write_overlapped

    b = load_binary(binary, demangle=not no_demangle, debug_dirs=debug_dirs, decoder=decoder)

    def emit(fh: IO[bytes]) -> None:
        if as_json:
            write_json(b, fh)
        else:
            write_overlapped((t.encode() for t in iter_text(b)), fh)

    if output:
        with atomic_open(output, "wb") as fh:
            emit(fh)
    else:  # `| head`: BrokenPipeError, exit 141 (bbmap.cli.guarded)
        emit(sys.stdout.buffer)
        sys.stdout.buffer.flush()
    problems = [d for d in b.diagnostics if d.severity == "error"]
    for d in problems:
        click.echo(f"bbmap: error: {d}", err=True)
    if b.block_map.num_functions == 0 and not problems and b.go is not None:
        from bbmap.binary.go import no_block_map_reason

        click.echo(f"bbmap: warning: {binary} has no basic-block address map: "
                   f"{no_block_map_reason(b.go)}; profiles of it still get per-function "
                   "counts (bbmap annotate)", err=True)
    elif b.block_map.num_functions == 0 and not problems:
        click.echo(f"bbmap: warning: {binary} has no basic-block address map (no "
                   "SHT_LLVM_BB_ADDR_MAP section, .bb_info or LLVM 11 label symbols); "
                   "clang >= 19 emits one with -fbasic-block-address-map, clang 12-18 with "
                   "-fbasic-block-sections=labels", err=True)
    allow_quick_exit()  # output written and closed, the writer thread joined
    sys.exit(EXIT_PROBLEMS if problems else EXIT_OK)
