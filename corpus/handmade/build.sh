#!/bin/sh
# Rebuild the hand-made inputs: assembly -> objects (GNU as) -> static executables (GNU ld),
# then the oracles: llvm-readobj-22 JSON for the versions it decodes (3, 4) and nm symbol
# listings for the inputs no LLVM reader decodes (.bb_info, LLVM 11 label symbols, i386 REL).
set -eu
cd "$(dirname "$0")"
for f in labels v3 v4 bb_info; do
  as "src/$f.s" -o "$f.o"
  ld -e _start "$f.o" -o "$f.exe"
done
as --32 src/v5_i386.s -o v5_i386.o
mkdir -p golden
for f in v3 v4; do
  for e in o exe; do
    llvm-readobj-22 --bb-addr-map --elf-output-style=JSON "$f.$e" > "golden/$f.$e.readobj22.json"
  done
done
for f in labels.o labels.exe bb_info.o bb_info.exe v5_i386.o; do
  nm "$f" | sort > "golden/$f.nm.txt"
done
# CREL relocations (LLVM 21+ assembler option), compiled rather than hand-written
clang-22 -O2 -c -fbasic-block-address-map -ffunction-sections -Wa,--crel,--allow-experimental-crel \
  -ffile-prefix-map="$PWD"=. src/crel.c -o crel.o
llvm-readobj-22 --bb-addr-map --elf-output-style=JSON crel.o > golden/crel.o.readobj22.json
# SHF_COMPRESSED maps (zlib and zstd), decompressed by both readers
for z in zlib zstd; do
  llvm-objcopy-22 --compress-sections=.llvm_bb_addr_map=$z v4.exe "v4-$z.exe"
  llvm-readobj-22 --bb-addr-map --elf-output-style=JSON "v4-$z.exe" > "golden/v4-$z.exe.readobj22.json"
done
