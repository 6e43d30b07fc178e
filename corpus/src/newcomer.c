/* What a new user profiles first: a small C program with a hot loop called 10^5+ times
 * (collatz_steps, 400,000 calls), a quadratic sort called 600 times (bubble), and a
 * classifier whose branches the input decides (classify).  corpus/build builds it with
 * the PGO analysis map from an instrumented run of the same input (verify --profile). */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static int collatz_steps(unsigned long n) {
  int steps = 0;
  while (n != 1) {
    n = (n & 1) ? 3 * n + 1 : n / 2;
    steps++;
  }
  return steps;
}

__attribute__((noinline)) static void bubble(int *a, int n) {
  for (int i = 0; i < n - 1; i++)
    for (int j = 0; j < n - 1 - i; j++)
      if (a[j] > a[j + 1]) {
        int t = a[j];
        a[j] = a[j + 1];
        a[j + 1] = t;
      }
}

__attribute__((noinline)) static int classify(int steps) {
  if (steps < 20) return 0;
  if (steps < 60) return 1;
  if (steps < 120) return 2;
  return 3;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1;
  long hist[4] = {0};
  long total = 0;
  static int a[200];
  for (int r = 0; r < rounds; r++) {
    for (unsigned long n = 1; n <= 400000; n++) {
      int s = collatz_steps(n);
      total += s;
      hist[classify(s)]++;
    }
    for (int k = 0; k < 600; k++) {
      for (int i = 0; i < 200; i++) a[i] = (i * 7919 + k * 31) % 1000;
      bubble(a, 200);
      total += a[k % 200];
    }
  }
  printf("%ld %ld %ld %ld %ld\n", total, hist[0], hist[1], hist[2], hist[3]);
  return 0;
}
