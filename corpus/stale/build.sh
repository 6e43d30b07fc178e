#!/bin/sh
# Rebuild corpus/stale from source: two releases of src/prog.c with clang-22, each with and
# without the block hashes, -O2 and -O3; a perf profile of each profiled (release 1) build
# and valgrind's exact counts of each next build.  Run from corpus/stale; needs clang-22,
# perf (cpu-clock), valgrind, and PYTHON (default python3) with bbmap's dependencies.  Binaries are non-PIE so valgrind's addresses are the ELF's;
# objects are compiled to fixed names first, so a rebuild is byte-identical.
set -eu
CC=${CC:-clang-22}
PERF_ROUNDS=${PERF_ROUNDS:-40000}  # about a second: ~10,000 cpu-clock samples
EXACT_ROUNDS=${EXACT_ROUNDS:-4000}  # valgrind is ~50x slower; counts scale with rounds
mkdir -p bin profiles exact obj
base="-fbasic-block-address-map -funique-internal-linkage-names -fno-pie"
build() {  # NAME SRC OPT [HASH]
  $CC $3 $base ${4:+-mllvm -emit-bb-hash} -c -o obj/$1.o src/$2
  $CC -no-pie -Wl,--build-id -o bin/$1 obj/$1.o
}
build v1-O2-hash prog_v1.c -O2 1
build v2-O2-hash prog_v2.c -O2 1
build v1-O3-hash prog_v1.c -O3 1
build v1-O2 prog_v1.c -O2
build v2-O2 prog_v2.c -O2
# a rebuild of v1-O2 (no hashes: clang 22's -emit-bb-hash makes a compile differ from run
# to run, in the instruction part of some hashes)
build v1-O2-rebuild prog_v1.c -O2
cmp bin/v1-O2 bin/v1-O2-rebuild
# src/varint.c: a callee with branches and a loop, a function in release 1, inlined into
# its caller (and compiled anew there) in release 2
$CC -O2 $base -c -o obj/varint-v1.o src/varint.c
$CC -no-pie -Wl,--build-id -o bin/varint-v1 obj/varint-v1.o
$CC -O2 -DINLINE $base -c -o obj/varint-v2.o src/varint.c
$CC -no-pie -Wl,--build-id -o bin/varint-v2 obj/varint-v2.o
# src/dispatch.c: an interpreter loop; release 2 adds an opcode and edits several bodies
$CC -O2 $base -c -o obj/dispatch-v1.o src/dispatch.c
$CC -no-pie -Wl,--build-id -o bin/dispatch-v1 obj/dispatch-v1.o
$CC -O2 -DVERSION=2 $base -c -o obj/dispatch-v2.o src/dispatch.c
$CC -no-pie -Wl,--build-id -o bin/dispatch-v2 obj/dispatch-v2.o
rm -r obj
# the profiled builds, and fresh profiles of the next builds (what a stale profile is
# measured against)
for b in v1-O2-hash v1-O2 v2-O2-hash v1-O3-hash v2-O2; do
  perf record -q -e cpu-clock -F 10000 -o profiles/$b.perf.data -- bin/$b $PERF_ROUNDS >/dev/null
done
for b in varint-v1 varint-v2; do  # ~0.4 s each
  perf record -q -e cpu-clock -F 10000 -o profiles/$b.perf.data -- bin/$b 150000 >/dev/null
done
for b in dispatch-v1 dispatch-v2; do
  perf record -q -e cpu-clock -F 10000 -o profiles/$b.perf.data -- bin/$b 15000 >/dev/null
done
valgrind -q --tool=callgrind --dump-instr=yes --callgrind-out-file=exact/dispatch-v2.callgrind \
  bin/dispatch-v2 300 >/dev/null
PYTHONPATH=../.. ${PYTHON:-python3} ../tools/callgrind_counts.py exact/dispatch-v2.callgrind \
  bin/dispatch-v2 300 > exact/dispatch-v2.json
rm exact/dispatch-v2.callgrind
valgrind -q --tool=callgrind --dump-instr=yes --callgrind-out-file=exact/varint-v2.callgrind \
  bin/varint-v2 2500 >/dev/null
PYTHONPATH=../.. ${PYTHON:-python3} ../tools/callgrind_counts.py exact/varint-v2.callgrind \
  bin/varint-v2 2500 > exact/varint-v2.json
rm exact/varint-v2.callgrind
for b in v2-O2-hash v1-O3-hash v2-O2 v1-O2-hash; do
  valgrind -q --tool=callgrind --dump-instr=yes --callgrind-out-file=exact/$b.callgrind \
    bin/$b $EXACT_ROUNDS >/dev/null
  PYTHONPATH=../.. ${PYTHON:-python3} ../tools/callgrind_counts.py exact/$b.callgrind bin/$b \
    $EXACT_ROUNDS > exact/$b.json
  rm exact/$b.callgrind
done
