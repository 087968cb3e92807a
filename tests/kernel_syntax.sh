#!/usr/bin/env bash
# kernel_syntax.sh SRCDIR - compiles each kernel template of
# src/codegen/kernels/ on its own, instantiated with the example steps of
# tests/kernels/*_examples.cu: with nvcc to PTX for sm_80 and sm_90 (nvcc
# has no -fsyntax-only; PTX is the device front end and optimiser without
# an assembler run) after the NVRTC prelude, and with the host C++
# compiler after the emulated device's prelude, as the emulator compiles
# them. Skipped (77) when neither compiler is found.
set -u
src=$1
. "$(dirname "$0")/find_nvcc.sh"
cxx=$(command -v c++ || command -v g++ || command -v clang++)
[ -n "$nvcc$cxx" ] || { echo "no nvcc and no C++ compiler: skipped"; exit 77; }
passed=0 failed=0
check() { # what, command...
  local what=$1 log
  shift
  if log=$("$@" 2>&1); then
    passed=$((passed + 1))
  else
    echo "FAIL: $what" >&2
    echo "$log" >&2
    failed=$((failed + 1))
  fi
}
for ex in "$src"/tests/kernels/*_examples.cu; do
  name=$(basename "$ex")
  if [ -n "$nvcc" ]; then
    for arch in sm_80 sm_90; do
      check "nvcc $arch $name" "$nvcc" -std=c++17 -arch="$arch" --ptx \
        -o /dev/null -I "$src/src/codegen" -include prelude_nvrtc.cuh "$ex"
    done
  fi
  if [ -n "$cxx" ]; then
    # both ways the emulator builds __shared__: thread-locals, and (under
    # sanitizers) globals in one section
    for mode in -UEIN_EMU_SHARED_GLOBAL -DEIN_EMU_SHARED_GLOBAL; do
      check "host C++ $mode $name" "$cxx" -c -o /dev/null -std=c++17 -O1 \
        -fPIC -Wall -Werror "$mode" -x c++ -I "$src/src/codegen" \
        -include prelude_host.h "$ex"
    done
  fi
done
echo "ein-test-summary: kernel_syntax: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
