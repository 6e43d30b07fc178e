/* libkern.c - a shared library whose code is hot when app.c drives it.
 * kern_mix: loop + dense switch (jump table); kern_walk: loop with early exit and a
 * rarely-taken branch; kern_reject: cold error path. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline, cold)) void kern_reject(const char *why, long v) {
  fprintf(stderr, "libkern: %s (%ld)\n", why, v);
  exit(4);
}

__attribute__((noinline)) unsigned kern_mix(const unsigned char *buf, int n, unsigned h) {
  for (int i = 0; i < n; i++) {
    switch (buf[i] & 7) {
    case 0: h = h * 31 + buf[i]; break;
    case 1: h ^= (unsigned)buf[i] << 7; break;
    case 2: h += h >> 3; break;
    case 3: h = (h << 5) | (h >> 27); break;
    case 4: h -= buf[i]; break;
    case 5: h *= 0x9e3779b1u; break;
    case 6: h ^= h >> 11; break;
    default: h += 0x7f4a7c15u; break;
    }
  }
  return h;
}

__attribute__((noinline)) int kern_walk(const unsigned *v, int n, unsigned needle) {
  int hits = 0;
  for (int i = 0; i < n; i++) {
    if (v[i] == needle)
      return -1 - i; /* early exit, rare */
    if ((v[i] & 3) == 0)
      hits++;
  }
  return hits;
}

unsigned kern_round(unsigned char *buf, unsigned *words, int n, unsigned seed) {
  if (n <= 0)
    kern_reject("empty buffer", n);
  for (int i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    buf[i] = (unsigned char)(seed >> 24);
    words[i] = seed;
  }
  unsigned h = kern_mix(buf, n, seed);
  int w = kern_walk(words, n, 0xdeadbeefu);
  return h + (unsigned)w;
}
