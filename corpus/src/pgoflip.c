/* pgoflip.c - a program whose hot path is chosen by its input, for `bbmap verify --profile`.
 *
 *   pgoflip ROUNDS < INPUT
 *
 * INPUT is text, one record per line: an operator (+ - * /) and a decimal number, e.g.
 * "+ 17" or "* -123456789".  The program reads every record, then processes all of them
 * ROUNDS times.  Which branches are hot depends only on the records:
 *
 *   pf_digits    loop over the digits: its trip count is the length of the numbers
 *   pf_sign      negative or not: pf_negative / pf_positive
 *   pf_magnitude above a million or not: pf_big is called only for large numbers
 *   pf_apply     the operator: a four-way choice
 *   pf_low_bits  (value & 7) == 0: the same share for any input whose low bits are uniform
 *   pf_every     the record's position (every third one, odd popcount): any input alike
 *   pf_check     a guard that never fails on well-formed records
 *
 * src/pgoflip-train.txt (short positive numbers, mostly "+") trains the instrumentation
 * profile; src/pgoflip-shift.txt (long negative numbers, mostly "*") flips the branches of
 * pf_digits, pf_sign, pf_magnitude and pf_apply and keeps those of pf_low_bits, pf_every
 * and pf_check as they were.  The arms
 * call noinline functions that write memory, so that no arm becomes a select or cmov. */
#include <stdio.h>
#include <stdlib.h>

#define PF_MAX 4096

struct pf_rec {
  char op;
  const char *text; /* the number as written */
};

static struct pf_rec pf_recs[PF_MAX];
static char pf_text[PF_MAX * 24];
volatile long pf_sink[8];

__attribute__((noinline)) static void pf_note(int slot, long v) { pf_sink[slot & 7] += v; }

__attribute__((noinline)) long pf_digits(const char *s) {
  int neg = *s == '-';
  long v = 0;
  for (s += neg; *s >= '0' && *s <= '9'; s++)
    v = v * 10 + (*s - '0');
  return neg ? -v : v;
}

__attribute__((noinline)) long pf_negative(long v) {
  pf_note(1, v);
  return -v * 3;
}

__attribute__((noinline)) long pf_positive(long v) {
  pf_note(2, v);
  return v + 11;
}

__attribute__((noinline)) long pf_sign(long v) {
  if (v < 0)
    return pf_negative(v);
  return pf_positive(v);
}

__attribute__((noinline)) long pf_big(long v) {
  pf_note(3, v);
  return v / 1000;
}

__attribute__((noinline)) long pf_magnitude(long v) {
  long a = v < 0 ? -v : v;
  if (a > 1000000)
    return pf_big(v);
  pf_note(4, v);
  return v;
}

__attribute__((noinline)) long pf_apply(char op, long acc, long v) {
  switch (op) {
  case '+':
    pf_note(5, v);
    return acc + v;
  case '-':
    pf_note(6, v);
    return acc - v;
  case '*':
    pf_note(7, v);
    return acc * (v | 1);
  default:
    pf_note(0, v);
    return v ? acc / v : acc;
  }
}

__attribute__((noinline)) long pf_low_bits(long v) {
  if ((v & 7) == 0) {
    pf_note(0, v);
    return v >> 3;
  }
  return v;
}

__attribute__((noinline)) void pf_every(int i) {
  if (i % 3 == 0)
    pf_note(1, i);
  if (__builtin_popcount((unsigned)i) & 1)
    pf_note(2, i);
}

__attribute__((noinline, cold)) static void pf_bad(int i) {
  fprintf(stderr, "pgoflip: record %d is malformed\n", i);
  exit(3);
}

__attribute__((noinline)) void pf_check(const struct pf_rec *r, int i) {
  if (r->text[0] == 0)
    pf_bad(i);
}

static int pf_read(FILE *f) {
  int n = 0;
  size_t used = 0;
  char line[128];
  while (n < PF_MAX && fgets(line, sizeof line, f)) {
    char op;
    char num[32];
    if (sscanf(line, " %c %31s", &op, num) != 2)
      continue;
    int len = 0;
    while (num[len])
      len++;
    if (used + len + 1 > sizeof pf_text)
      break;
    for (int i = 0; i <= len; i++)
      pf_text[used + i] = num[i];
    pf_recs[n].op = op;
    pf_recs[n].text = pf_text + used;
    used += len + 1;
    n++;
  }
  return n;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
  int n = pf_read(stdin);
  if (n == 0) {
    fprintf(stderr, "pgoflip: no records on stdin\n");
    return 2;
  }
  long acc = 0;
  for (long r = 0; r < rounds; r++) {
    for (int i = 0; i < n; i++) {
      pf_check(&pf_recs[i], i);
      pf_every(i);
      long v = pf_digits(pf_recs[i].text);
      v = pf_sign(v);
      v = pf_magnitude(v);
      v = pf_low_bits(v);
      acc = pf_apply(pf_recs[i].op, acc, v) & 0xffffffffffL;
    }
  }
  printf("pgoflip: %d records, %ld rounds, checksum %ld\n", n, rounds, acc);
  return 0;
}
