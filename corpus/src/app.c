/* app.c - main program linked against libkern.so; nearly all its time is in the library.
 * argv[1] = rounds (about 1-2 s at 40000). */
#include <stdio.h>
#include <stdlib.h>

unsigned kern_round(unsigned char *buf, unsigned *words, int n, unsigned seed);

#define APP_N 512

int main(int argc, char **argv) {
  long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 4000;
  static unsigned char buf[APP_N];
  static unsigned words[APP_N];
  unsigned acc = 0;
  for (long r = 0; r < rounds; r++)
    acc ^= kern_round(buf, words, APP_N, (unsigned)r * 2246822519u + acc);
  printf("app: %ld rounds, checksum %u\n", rounds, acc);
  return 0;
}
