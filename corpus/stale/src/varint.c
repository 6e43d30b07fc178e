/* corpus/stale: a callee with its own branches and loop, a function in release 1
   (noinline) and inlined into its only caller in release 2 (always_inline): its copy is
   compiled anew in the caller, so no block of it has the callee's opcodes (SQLite 3.54
   inlines sqlite3GetVarint so).  Three varints in four are one byte, about one in five
   two bytes, the rest four: the copy's long-varint loop is its rare tail. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef INLINE
#define VI static inline __attribute__((always_inline))
#else
#define VI static __attribute__((noinline))
#endif

VI int get_varint(const unsigned char *p, uint64_t *v) {
  if (p[0] < 0x80) {
    *v = p[0];
    return 1;
  }
  if (p[1] < 0x80) {
    *v = ((uint64_t)(p[0] & 0x7f) << 7) | p[1];
    return 2;
  }
  uint64_t x = 0;
  int i = 0;
  for (; i < 9; i++) {
    x = (x << 7) | (p[i] & 0x7f);
    if (p[i] < 0x80)
      break;
  }
  *v = x;
  return i + 1;
}

static __attribute__((noinline)) uint64_t scan(const unsigned char *buf, int n) {
  uint64_t s = 0;
  int i = 0;
  while (i < n) {
    uint64_t v;
    i += get_varint(buf + i, &v);
    s += v * 3 + ((v & 1) ? 7 : 1);
  }
  return s;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1000;
  static unsigned char buf[4100];
  unsigned r = 12345;
  int n = 0;
  while (n < 4000) {
    r = r * 1103515245u + 12345u;
    unsigned k = (r >> 16) % 100;
    if (k < 75) {
      buf[n++] = (r >> 8) & 0x7f;
    } else if (k < 97) {
      buf[n++] = 0x80 | ((r >> 8) & 0x7f);
      buf[n++] = (r >> 3) & 0x7f;
    } else {
      buf[n++] = 0x81;
      buf[n++] = 0x82;
      buf[n++] = 0x83;
      buf[n++] = 0x04;
    }
  }
  uint64_t t = 0;
  for (int j = 0; j < rounds; j++) {
    __asm__ volatile("" ::: "memory"); /* buf may have changed: scan again */
    t += scan(buf, n);
  }
  printf("%llu\n", (unsigned long long)t);
  return 0;
}
