#!/usr/bin/env bash
# The newcomer case (spec/corpus.md): what a new user profiles first, built with the PGO
# analysis map from an instrumented run of the same input, and one cpu-clock profile.
#   corpus/newcomer/build.sh            # from the repository root, clang-22 and perf needed
set -euo pipefail
cd "$(dirname "$0")/.."
W=work/newcomer
mkdir -p "$W"
RT=$(clang-22 -print-resource-dir)/lib/linux/libclang_rt.profile-x86_64.a
# the profile runtime is linked by hand: Debian's clang-22 looks for it under the
# per-target directory, libclang-rt-22-dev installs it under lib/linux
clang-22 -O2 -fprofile-instr-generate -ffile-prefix-map="$PWD"=. -c src/newcomer.c -o "$W/instr.o"
clang-22 "$W/instr.o" -Wl,-u,__llvm_profile_runtime "$RT" -o "$W/newcomer.instr"
LLVM_PROFILE_FILE="$W/newcomer.profraw" "$W/newcomer.instr" 1 > /dev/null
llvm-profdata-22 merge -o newcomer/newcomer.profdata "$W/newcomer.profraw"
clang-22 -O2 -Wall -ffile-prefix-map="$PWD"=. -fbasic-block-address-map \
  -mllvm -pgo-analysis-map=func-entry-count,bb-freq,br-prob \
  -fprofile-instr-use=newcomer/newcomer.profdata src/newcomer.c -fPIE -pie \
  -Wl,--build-id=sha1 -o newcomer/newcomer.pie
perf record -q -e cpu-clock:u -F 10000 -o newcomer/perf.data -- newcomer/newcomer.pie 10 > /dev/null
