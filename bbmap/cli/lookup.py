"""``bbmap lookup BINARY ADDR...``: function, range and block of addresses, in all three spaces."""

from __future__ import annotations

import json

import click

from bbmap.cli import EXIT_OK, EXIT_PROBLEMS, allow_quick_exit, guarded, main
from bbmap.cli.options import InputFile, max_section_size_option


@main.command("lookup", short_help="Map addresses to function, range and basic block.")
@click.argument("binary")
@click.argument("addrs", nargs=-1, required=True)
@click.option("--offset", "as_offset", is_flag=True, help="ADDRs are ELF file offsets.")
@click.option("--vma", "as_vma", is_flag=True,
              help="ADDRs are runtime addresses (needs --perf-data or --base).")
@click.option("--vaddr", "as_vaddr", is_flag=True,
              help="ADDRs are ELF virtual addresses (the default).")
@click.option("--perf-data", "perf_data", type=InputFile(), metavar="FILE",
              help="Profile whose mmap records say where the binary was loaded "
                   "(needed by --vma; otherwise gives the VMA of each address).")
@click.option("--pid", type=int, metavar="PID", help="Use this process's mappings of the profile.")
@click.option("--name", "name", metavar="NAME",
              help="The binary's name when profiled (if renamed).")
@click.option("--base", "base", metavar="ADDR",
              help="The load base address (instead of a profile).")
@click.option("--target", is_flag=True,
              help="Resolve as a branch target (first block starting at the address).")
@click.option("--explain", is_flag=True, help="Show what each of the three stages found.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@max_section_size_option()
@guarded
def lookup_cmd(binary: str, addrs: tuple[str, ...], as_offset: bool, as_vma: bool,
               as_vaddr: bool, perf_data: str | None,
               pid: int | None, name: str | None, base: str | None, target: bool,
               explain: bool, as_json: bool) -> None:
    """Map addresses of BINARY to function -> range -> basic block.

    \b
    Example:
      bbmap lookup ./app 401210 --perf-data perf.data --vma   # hex, as perf script prints
    """
    from bbmap.binary import load_binary
    from bbmap.errors import UsageError
    from bbmap.lookup import Lookuper, format_report, parse_address

    spaces = [s for s, given in (("offset", as_offset), ("vma", as_vma), ("vaddr", as_vaddr))
              if given]
    if len(spaces) > 1:  # one address cannot be read in two spaces at once
        raise UsageError(f"--{' and --'.join(spaces)} exclude each other: ADDRs are read in "
                         "one address space")
    space = spaces[0] if spaces else "vaddr"
    if pid is not None and not perf_data:
        raise UsageError("--pid needs --perf-data FILE")
    b = load_binary(binary)
    for d in b.diagnostics:
        click.echo(f"bbmap: {d.severity}: {d}", err=True)
    mappings = None
    if perf_data and base is None:
        from bbmap.mappings import ProfileMappings
        from bbmap.perf import PerfData

        mappings = ProfileMappings.from_perf_data(PerfData(perf_data), b, name_override=name,
                                                  pid=pid)
        for d in mappings.diagnostics:
            if mappings.evidence.binary_mappings:  # else each report carries the evidence
                click.echo(f"bbmap: {d.severity}: {d}", err=True)
    lk = Lookuper(b, mappings=mappings, base=None if base is None else parse_address(base))
    reports = [lk.lookup(a, space, pid=pid, to=target, explain=explain) for a in addrs]
    if as_json:
        click.echo(json.dumps([r.to_json() for r in reports], indent=2))
    else:
        if lk.identity():
            click.echo(f"{binary}: {lk.identity()}")
        for r in reports:
            click.echo(format_report(r))
    lost = [r for r in reports if r.vaddr is None]
    for r in lost:  # the report says it too; stderr says why the exit is 1
        click.echo(f"bbmap: error: {binary}: {r.input}: no ELF virtual address: {r.note}",
                   err=True)
    allow_quick_exit()  # all printed (the console script flushes): no teardown needed
    raise SystemExit(EXIT_PROBLEMS if lost else EXIT_OK)
