// gosymdump: a Go binary's function table as Go's own debug/gosym reads it, the oracle
// (tests/test_binary_go.py) and the peer (bench/bench_go.py) of bbmap's .gopclntab reader.
//
//	gosymdump BINARY    prints "entry end name" per function (hex addresses), then on
//	                    stderr the count and the seconds debug/gosym took
package main

import (
	"bufio"
	"debug/elf"
	"debug/gosym"
	"fmt"
	"os"
	"time"
)

func main() {
	f, err := elf.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sec := f.Section(".gopclntab")
	text := f.Section(".text")
	if sec == nil || text == nil {
		fmt.Fprintln(os.Stderr, "no .gopclntab or .text section")
		os.Exit(2)
	}
	data, err := sec.Data()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	start := time.Now()
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	took := time.Since(start).Seconds()
	out := bufio.NewWriter(os.Stdout)
	for _, fn := range tab.Funcs {
		fmt.Fprintf(out, "%x %x %s\n", fn.Entry, fn.End, fn.Name)
	}
	out.Flush()
	fmt.Fprintf(os.Stderr, "%d functions in %.6f s\n", len(tab.Funcs), took)
}
