/* Workload driver for the zstd amalgamation: compress and decompress a corpus of real files.
 *
 *   zstd_driver LEVELS MAXKB FILE...
 *
 * LEVELS is a comma list (e.g. -5,1,3,7,12,19); each file's first MAXKB KiB are compressed at
 * every level in turn (file by file, as an archiver choosing the best level per file would)
 * with one reused context and decompressed again (checked byte for byte); then
 * the whole corpus goes through the streaming API (level 3, checksums on, 64 KiB pieces),
 * and a dictionary trained on 4 KiB samples of the corpus compresses and decompresses every
 * sample.  Every compressed frame is folded into a 64-bit FNV-1a hash printed per phase, so
 * two builds of the same source can be compared byte for byte.  The profiling and the
 * measuring runs use different corpora (bench/bench_e2e.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define ZSTD_STATIC_LINKING_ONLY
#include "zstd.h"
#include "zdict.h"

static uint64_t hash = 0xCBF29CE484222325ull;

static void fold(const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) hash = (hash ^ s[i]) * 0x100000001B3ull;
}

static void check(size_t r, const char *what) {
  if (ZSTD_isError(r)) {
    fprintf(stderr, "zstd_driver: %s: %s\n", what, ZSTD_getErrorName(r));
    exit(1);
  }
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "zstd_driver: out of memory\n");
    exit(1);
  }
  return p;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: zstd_driver LEVELS MAXKB FILE...\n");
    return 2;
  }
  int levels[32], nlev = 0;
  for (char *s = argv[1]; *s && nlev < 32;) {
    levels[nlev++] = (int)strtol(s, &s, 10);
    if (*s == ',') s++;
  }
  size_t maxb = (size_t)atol(argv[2]) * 1024;
  int nfiles = argc - 3;
  unsigned char **data = xmalloc(sizeof *data * (size_t)nfiles);
  size_t *size = xmalloc(sizeof *size * (size_t)nfiles), total = 0;
  for (int i = 0; i < nfiles; i++) {
    FILE *f = fopen(argv[3 + i], "rb");
    if (!f) {
      perror(argv[3 + i]);
      return 1;
    }
    data[i] = xmalloc(maxb);
    size[i] = fread(data[i], 1, maxb, f);
    fclose(f);
    total += size[i];
  }

  /* one-shot: every file at every level, one reused context */
  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  ZSTD_DCtx *dctx = ZSTD_createDCtx();
  size_t cap = ZSTD_compressBound(maxb);
  unsigned char *comp = xmalloc(cap), *back = xmalloc(maxb);
  size_t csum[32] = {0};
  for (int i = 0; i < nfiles; i++) {
    for (int l = 0; l < nlev; l++) {
      size_t c = ZSTD_compressCCtx(cctx, comp, cap, data[i], size[i], levels[l]);
      check(c, "compress");
      size_t d = ZSTD_decompressDCtx(dctx, back, maxb, comp, c);
      check(d, "decompress");
      if (d != size[i] || memcmp(back, data[i], d)) {
        fprintf(stderr, "zstd_driver: round trip differs: %s level %d\n", argv[3 + i],
                levels[l]);
        return 1;
      }
      fold(comp, c);
      csum[l] += c;
    }
  }
  for (int l = 0; l < nlev; l++)
    printf("level %3d  %9zu -> %9zu\n", levels[l], total, csum[l]);
  printf("one-shot   %016llx\n", (unsigned long long)hash);

  /* streaming: the whole corpus as one frame, with a checksum, in 64 KiB pieces */
  size_t scap = ZSTD_compressBound(total) + 1024, spos = 0;
  unsigned char *stream = xmalloc(scap);
  check(ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters), "reset");
  check(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3), "level");
  check(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1), "checksum");
  for (int i = 0; i < nfiles; i++) {
    for (size_t off = 0; off < size[i]; off += 65536) {
      size_t n = size[i] - off < 65536 ? size[i] - off : 65536;
      ZSTD_inBuffer in = {data[i] + off, n, 0};
      while (in.pos < in.size) {
        ZSTD_outBuffer out = {stream, scap, spos};
        check(ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_continue), "stream");
        spos = out.pos;
      }
    }
  }
  for (size_t left = 1; left;) {
    ZSTD_inBuffer in = {0, 0, 0};
    ZSTD_outBuffer out = {stream, scap, spos};
    left = ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end);
    check(left, "stream end");
    spos = out.pos;
  }
  fold(stream, spos);
  {
    ZSTD_inBuffer in = {stream, spos, 0};
    size_t got = 0;
    uint64_t h = 0;
    while (in.pos < in.size) {
      ZSTD_outBuffer out = {back, maxb, 0};
      size_t r = ZSTD_decompressStream(dctx, &out, &in);
      check(r, "decompress stream");
      for (size_t k = 0; k < out.pos; k++) h = h * 31 + back[k];
      got += out.pos;
      if (r == 0 && in.pos == in.size) break;
    }
    if (got != total) {
      fprintf(stderr, "zstd_driver: streaming round trip lost bytes\n");
      return 1;
    }
    fold(&h, sizeof h);
  }
  printf("stream     %9zu -> %9zu  %016llx\n", total, spos, (unsigned long long)hash);

  /* dictionary: train on 4 KiB samples, then compress each sample with it */
  size_t nsamp = 0, *ssize = xmalloc(sizeof *ssize * (total / 4096 + (size_t)nfiles + 1));
  unsigned char *samples = xmalloc(total + 1);
  size_t sp = 0;
  for (int i = 0; i < nfiles; i++)
    for (size_t off = 0; off < size[i]; off += 4096) {
      size_t n = size[i] - off < 4096 ? size[i] - off : 4096;
      memcpy(samples + sp, data[i] + off, n);
      ssize[nsamp++] = n;
      sp += n;
    }
  unsigned char dict[32768];
  size_t dsize = ZDICT_trainFromBuffer(dict, sizeof dict, samples, ssize, (unsigned)nsamp);
  if (ZDICT_isError(dsize)) {
    fprintf(stderr, "zstd_driver: dictionary: %s\n", ZDICT_getErrorName(dsize));
    return 1;
  }
  fold(dict, dsize);
  ZSTD_CDict *cd = ZSTD_createCDict(dict, dsize, 3);
  ZSTD_DDict *dd = ZSTD_createDDict(dict, dsize);
  size_t dsum = 0;
  sp = 0;
  for (size_t k = 0; k < nsamp; k++) {
    size_t c = ZSTD_compress_usingCDict(cctx, comp, cap, samples + sp, ssize[k], cd);
    check(c, "compress dict");
    size_t d = ZSTD_decompress_usingDDict(dctx, back, maxb, comp, c, dd);
    check(d, "decompress dict");
    if (d != ssize[k] || memcmp(back, samples + sp, d)) {
      fprintf(stderr, "zstd_driver: dictionary round trip differs\n");
      return 1;
    }
    fold(comp, c);
    dsum += c;
    sp += ssize[k];
  }
  printf("dict %5zu  %9zu -> %9zu  %016llx\n", dsize, total, dsum, (unsigned long long)hash);
  ZSTD_freeCDict(cd);
  ZSTD_freeDDict(dd);
  ZSTD_freeCCtx(cctx);
  ZSTD_freeDCtx(dctx);
  return 0;
}
