/* corpus/stale: an interpreter loop (SQLite's sqlite3VdbeExec in small).  Release 2 adds
   an opcode (the jump table grows: its entries no longer pair by index) and edits the
   bodies of several others (an instruction more or less: other opcodes, other hashes),
   so their blocks match neither by a hash nor by their neighbourhood, only by how alike
   their instructions are. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#ifndef VERSION
#define VERSION 1
#endif

static uint32_t st = 2463534242u;
static uint32_t rnd(void) {
  st ^= st << 13;
  st ^= st >> 17;
  st ^= st << 5;
  return st;
}

__attribute__((noinline)) static uint64_t run(const uint8_t *ops, int n, uint64_t acc,
                                              uint64_t *mem) {
  for (int i = 0; i < n; i++) {
    switch (ops[i]) {
    case 0: acc += acc >> 3; break;
    case 1: acc ^= acc * 0x9E3779B97F4A7C15ull; break;
    case 2: acc = (acc << 7) | (acc >> 57); break;
#if VERSION == 2
    case 3: acc -= (acc >> 11) + mem[acc & 63] + 1; break;
    case 4: mem[acc & 63] += acc ^ (acc >> 5); break;
    case 5: if (acc & 1) acc = acc * 5 + mem[(acc >> 8) & 63]; else acc >>= 2; break;
    case 6: acc += mem[i & 63] * 3 + 7; break;
    case 7: mem[(acc >> 3) & 63] ^= acc + 1; acc++; break;
    case 8: acc = acc * 0xff51afd7ed558ccdull; acc ^= acc >> 29; break;
#else
    case 3: acc -= (acc >> 11) + mem[acc & 63]; break;
    case 4: mem[acc & 63] += acc; break;
    case 5: if (acc & 1) acc = acc * 5 + mem[(acc >> 8) & 63]; else acc >>= 1; break;
    case 6: acc += mem[i & 63] * 3; break;
    case 7: mem[(acc >> 3) & 63] ^= acc; acc++; break;
#endif
    default: acc += ops[i]; break;
    }
  }
  return acc;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1000;
  static uint8_t ops[4096];
  static uint64_t mem[64];
  for (int i = 0; i < 4096; i++) {
    uint32_t r = rnd() % 100;
    ops[i] = r < 30 ? 0 : r < 45 ? 1 : r < 55 ? 2 : r < 68 ? 3 : r < 78 ? 4 : r < 88 ? 5
             : r < 94 ? 6 : r < 98 ? 7 : r < 99 ? 8 : 9;
  }
  uint64_t t = 1;
  for (int j = 0; j < rounds; j++) {
    __asm__ volatile("" ::: "memory");
    t = run(ops, 4096, t, mem);
  }
  printf("%llu\n", (unsigned long long)t);
  return 0;
}
