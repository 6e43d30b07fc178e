/* layout.c - the corpus program: code shapes that basic-block layout cares about.
 *
 *   lay_scan        loop with an if/else chain
 *   lay_insertion   nested loops (insertion sort)
 *   lay_opcode      dense switch -> jump table (indirect branch)
 *   lay_rarity      sparse switch -> compare tree
 *   lay_depth       recursion (binary tree walk)
 *   lay_even/odd    mutual tail calls (jmp, not call, at -O2)
 *   lay_dispatch    tail call through a function-pointer table
 *   lay_apply       indirect calls through a function-pointer table
 *   lay_interp      computed goto (labels as values) -> indirect branches
 *   lay_die         __attribute__((cold)) error path, reached only on bad input
 *   main            the driver: argv[1] = iteration count (about 1-2 s at 20000)
 *
 * Build with -DLAYOUT_NO_MAIN to get the functions only (shared-library variant).
 *
 * layout-rebuilt.c is layout.c with one statement added to main's loop (marked below):
 * the rebuild moves the functions after main by 0x10 (the fit check's rebuilt case). */
#include <stdio.h>
#include <stdlib.h>

#define LAY_N 192

__attribute__((noinline, cold)) void lay_die(const char *what, long value) {
  fprintf(stderr, "layout: %s (%ld)\n", what, value);
  exit(3);
}

__attribute__((noinline)) unsigned lay_scan(const int *v, int n) {
  unsigned acc = 0;
  for (int i = 0; i < n; i++) {
    if (v[i] < 0)
      acc += (unsigned)(-v[i]) * 3u;
    else if (v[i] & 1)
      acc ^= (unsigned)v[i] << 1;
    else
      acc += (unsigned)v[i];
  }
  return acc;
}

__attribute__((noinline)) void lay_insertion(int *v, int n) {
  for (int i = 1; i < n; i++) {
    int key = v[i], j = i - 1;
    while (j >= 0 && v[j] > key) {
      v[j + 1] = v[j];
      j--;
    }
    v[j + 1] = key;
  }
}

__attribute__((noinline)) int lay_opcode(int x) {
  switch (x & 15) {
  case 0: return x * 7;
  case 1: return x + 13;
  case 2: return x ^ 0x3c;
  case 3: return x / 5;
  case 4: return -x;
  case 5: return x << 3;
  case 6: return x >> 2;
  case 7: return x * x;
  case 8: return x - 77;
  case 10: return x % 89;
  case 11: return ~x;
  default: return 2;
  }
}

__attribute__((noinline)) int lay_rarity(int code) {
  switch (code) {
  case 3: return 1;
  case 29: return 2;
  case 511: return 3;
  case 8191: return 4;
  case 131071: return 5;
  default: return 0;
  }
}

__attribute__((noinline)) unsigned lay_depth(unsigned n) {
  if (n < 2)
    return 1;
  return lay_depth(n - 1) + lay_depth(n - 2) + 1;
}

int lay_odd(unsigned n);
__attribute__((noinline)) int lay_even(unsigned n) { return n == 0 ? 1 : lay_odd(n - 1); }
__attribute__((noinline)) int lay_odd(unsigned n) { return n == 0 ? 0 : lay_even(n - 1); }

typedef int (*lay_fn)(int);
__attribute__((noinline)) static int lay_inc(int x) { return x + 1; }
__attribute__((noinline)) static int lay_dbl(int x) { return x * 2; }
__attribute__((noinline)) static int lay_neg(int x) { return -x; }
__attribute__((noinline)) static int lay_sq(int x) { return (x & 0xff) * (x & 0xff); }
static lay_fn volatile lay_table[4] = {lay_inc, lay_dbl, lay_neg, lay_sq};

__attribute__((noinline)) int lay_dispatch(int sel, int x) {
  return lay_table[sel & 3](x); /* tail call through a pointer */
}

__attribute__((noinline)) int lay_apply(const int *v, int n) {
  int acc = 0;
  for (int i = 0; i < n; i++)
    acc += lay_table[(unsigned)v[i] % 4u](v[i]); /* indirect call */
  return acc;
}

/* A tiny bytecode machine dispatched with computed goto. */
__attribute__((noinline)) long lay_interp(const unsigned char *code, int len, long x) {
  static void *const ops[] = {&&op_add, &&op_mul, &&op_xor, &&op_jnz, &&op_end};
  int pc = 0;
  long counter = 3;
#define NEXT                                                                                     \
  do {                                                                                           \
    if (pc >= len)                                                                               \
      return x;                                                                                  \
    goto *ops[code[pc++] % 5];                                                                   \
  } while (0)
  NEXT;
op_add:
  x += 7;
  NEXT;
op_mul:
  x = x * 3 + 1;
  NEXT;
op_xor:
  x ^= 0x55aa;
  NEXT;
op_jnz:
  if (--counter > 0)
    pc = 0;
  NEXT;
op_end:
  return x;
#undef NEXT
}

__attribute__((noinline)) unsigned lay_round(int *v, int n, unsigned seed) {
  for (int i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    v[i] = (int)((seed >> 8) & 0xffff) - 0x4000;
  }
  if (v[0] == 0x7fffffff) /* never true: the values fit in 17 bits */
    lay_die("impossible value", v[0]);
  unsigned acc = lay_scan(v, n);
  lay_insertion(v, n);
  for (int i = 0; i < n; i += 4)
    acc += (unsigned)lay_opcode(v[i]) + (unsigned)lay_rarity(v[i] & 0x1ffff);
  acc += (unsigned)lay_apply(v, n / 4);
  acc += (unsigned)lay_dispatch((int)seed, (int)acc);
  acc += (unsigned)lay_even(seed & 63);
  static const unsigned char prog[] = {0, 1, 2, 0, 3, 1, 2, 4};
  acc += (unsigned)lay_interp(prog, (int)sizeof prog, (long)acc);
  if ((seed & 1023) == 0)
    acc += lay_depth(12);
  return acc;
}

#ifndef LAYOUT_NO_MAIN
int main(int argc, char **argv) {
  long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
  if (iters < 0)
    lay_die("negative iteration count", iters);
  static int v[LAY_N];
  unsigned acc = 0, seed = 12345;
  for (long it = 0; it < iters; it++) {
    acc += lay_round(v, LAY_N, seed);
    seed += (unsigned)it * 2654435761u;
    acc ^= seed >> 7; /* the added statement */
  }
  printf("layout: %ld rounds, checksum %u\n", iters, acc);
  return 0;
}
#endif
