/* Two releases of one small program for bbmap's stale-profile corpus (corpus/stale).
 * VERSION 1 is the release that was profiled, VERSION 2 the next one:
 *   - checksum() edited (a new branch on the high bits), classify() edited (an early
 *     return before the switch: every block ID after it shifts),
 *   - scale() added (called from the main loop), retire() removed,
 *   - mix() inlined in release 2 (noinline in release 1),
 *   - the static helpers get -funique-internal-linkage-names suffixes from the file
 *     that includes this one (prog_v1.c / prog_v2.c), so their names differ. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef VERSION
#define VERSION 1
#endif

#define N 4096

static uint32_t state = 2463534242u;

static uint32_t next_rand(void) {
  state ^= state << 13;
  state ^= state >> 17;
  state ^= state << 5;
  return state;
}

#if VERSION == 1
__attribute__((noinline))
#else
static inline __attribute__((always_inline))
#endif
uint32_t mix(uint32_t a, uint32_t b) {
  a ^= b * 0x9e3779b1u;
  a = (a << 7) | (a >> 25);
  return a * 0x85ebca6bu;
}

__attribute__((noinline)) static uint32_t checksum(const uint32_t *v, int n) {
  uint32_t h = 0;
  for (int i = 0; i < n; i++) {
    if (v[i] & 1)
      h = mix(h, v[i]);
    else
      h += v[i] >> 3;
#if VERSION == 2
    if (v[i] > 0xf0000000u)
      h ^= 0x5bd1e995u;
#endif
  }
  return h;
}

__attribute__((noinline)) static void insertion_sort(uint32_t *v, int n) {
  for (int i = 1; i < n; i++) {
    uint32_t x = v[i];
    int j = i - 1;
    while (j >= 0 && v[j] > x) {
      v[j + 1] = v[j];
      j--;
    }
    v[j + 1] = x;
  }
}

__attribute__((noinline)) static int classify(uint32_t x) {
#if VERSION == 2
  if (x < 0x100000u)
    return 9;
#endif
  switch (x % 7) {
  case 0: return 3;
  case 1: return x & 15;
  case 2: return (int)(x >> 28);
  case 3: return 7;
  case 4: return (int)((x >> 4) & 3);
  case 5: return 11;
  default: return 1;
  }
}

#if VERSION == 1
__attribute__((noinline)) static uint32_t retire(const uint32_t *v, int n) {
  uint32_t m = 0;
  for (int i = 0; i < n; i += 3)
    if (v[i] > m)
      m = v[i];
  return m;
}
#else
__attribute__((noinline)) static uint32_t scale(const uint32_t *v, int n) {
  uint32_t s = 1;
  for (int i = 0; i < n; i += 5)
    s = s * 3 + (v[i] & 255);
  return s;
}
#endif

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200;
  static uint32_t v[N];
  uint32_t total = 0;
  int hist[16] = {0};
  for (int r = 0; r < rounds; r++) {
    int n = 256 + (int)(next_rand() % 512);
    for (int i = 0; i < n; i++)
      v[i] = next_rand();
    total += checksum(v, n);
    insertion_sort(v, n / 8);
    for (int i = 0; i < n; i++)
      hist[classify(v[i])]++;
#if VERSION == 1
    total ^= retire(v, n);
#else
    total ^= scale(v, n);
#endif
  }
  for (int i = 0; i < 16; i++)
    total += (uint32_t)hist[i] * (uint32_t)i;
  printf("%u\n", total);
  return 0;
}
