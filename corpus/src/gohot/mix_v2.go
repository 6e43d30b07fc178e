//go:build v2

package main

// mix, changed: a rotate added to every step (the "rebuilt with a change" build).
//
//go:noinline
func mix(buf []byte, seed uint64) uint64 {
	h := uint64(14695981039346656037) ^ seed
	for pass := 0; pass < 32; pass++ {
		for _, x := range buf {
			h ^= uint64(x)
			h *= 1099511628211
			h = h<<13 | h>>51
		}
	}
	return h
}
