// gohot: the Go program of the bbmap corpus (corpus/build, stage "go").
//
// CPU-bound and deterministic: four hot functions of distinct shape, each marked
// //go:noinline so that perf and bbmap attribute samples to them by name.  The
// build tag "v2" swaps mix.go for mix_v2.go: the same program with a code change,
// for the "profiled one build, annotated another" case.
//
//	gohot ROUNDS     (corpus profile: 1000 rounds, about 1.5 s)
package main

import (
	"os"
	"strconv"
)

//go:noinline
func sieve(n int) int {
	composite := make([]bool, n+1)
	count := 0
	for i := 2; i <= n; i++ {
		if composite[i] {
			continue
		}
		count++
		for j := i * i; j <= n; j += i {
			composite[j] = true
		}
	}
	return count
}

//go:noinline
func collatz(limit uint64) uint64 {
	var best uint64
	for start := uint64(1); start < limit; start++ {
		steps := uint64(0)
		for x := start; x != 1; steps++ {
			if x&1 == 0 {
				x >>= 1
			} else {
				x = 3*x + 1
			}
		}
		if steps > best {
			best = steps
		}
	}
	return best
}

//go:noinline
func matmul(a, b, c []float64, n int) {
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for k := 0; k < n; k++ {
				s += a[i*n+k] * b[k*n+j]
			}
			c[i*n+j] = s
		}
	}
}

func main() {
	rounds := 1000
	if len(os.Args) > 1 {
		if r, err := strconv.Atoi(os.Args[1]); err == nil && r > 0 {
			rounds = r
		}
	}
	const n = 64
	a, b, c := make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
	for i := range a {
		a[i], b[i] = float64(i%7), float64(i%5)
	}
	buf := make([]byte, 1<<14)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	var acc uint64
	for r := 0; r < rounds; r++ {
		acc += uint64(sieve(200000))
		acc += collatz(5000)
		matmul(a, b, c, n)
		acc += uint64(c[r%(n*n)])
		acc += mix(buf, uint64(r))
	}
	os.Stdout.WriteString(strconv.FormatUint(acc, 10) + "\n")
}
