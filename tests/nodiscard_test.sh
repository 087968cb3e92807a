#!/usr/bin/env bash
# nodiscard_test.sh CC INCLUDE_DIR [DLPACK_DIR] - the public header marks
# every status-returning function EIN_NODISCARD: a program that ignores a
# status does not compile under -Werror=unused-result, and one that writes
# (void)f(...) does, in C (also -pedantic) and, where a C++ compiler is
# found, in C++.
set -u
CC=${1:?usage: nodiscard_test.sh CC INCLUDE_DIR [DLPACK_DIR]}
INC=${2:?}
DLP=${3:-}
passed=0 failed=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
flags=(-I"$INC" -Wall -Wextra -Werror=unused-result -fsyntax-only)
[ -n "$DLP" ] && flags+=(-I"$DLP")

# declarations, then a call that returns a status, which each program ignores
decls=('ein_ctx *c;' 'ein_shape_memo *m = 0; DLTensor t = {0};'
  'ein_reduction r;' 'ein_ctx *c = 0;')
calls=('ein_ctx_create(&c)' 'EIN_SHAPE_CHECK(m, "a", &t)'
  'ein_reduction_parse("sum", &r)' 'ein_ctx_synchronize(c)')

# compiles LANG STD EXTRA BODY: true when the program compiles
compiles() {
  local lang=$1 std=$2 extra=$3 body=$4 src="$dir/t.$1"
  printf '#include "ein.h"\nvoid f(void);\nvoid f(void) { %s }\n' "$body" >"$src"
  "$CC" -x "$lang" -std="$std" $extra "${flags[@]}" "$src" 2>/dev/null
}

check() { # check WANT(0 compiles, 1 rejected) WHAT LANG STD EXTRA BODY
  local want=$1 what=$2
  shift 2
  compiles "$@"
  local got=$?
  [ "$got" -ne 0 ] && got=1
  if [ "$got" = "$want" ]; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL: $what ($1 $2 $3): $4" >&2; fi
}

for k in "${!calls[@]}"; do
  d=${decls[$k]} c=${calls[$k]}
  check 1 "an ignored status is rejected" c gnu17 "" "$d $c;"
  check 1 "an ignored status is rejected" c c17 "-pedantic -Werror" "$d $c;"
  check 0 "(void) ignores on purpose" c gnu17 "" "$d (void)$c;"
done
# the header itself is clean under -pedantic
check 0 "the header under -pedantic" c c17 "-pedantic -Werror" ""
check 0 "(void) under -pedantic" c c17 "-pedantic -Werror" \
  'ein_ctx *c; (void)ein_ctx_create(&c);'
if "$CC" -x c++ -std=c++17 -fsyntax-only /dev/null 2>/dev/null; then
  check 1 "an ignored status is rejected" c++ c++17 "" 'ein_ctx *c; ein_ctx_create(&c);'
  check 0 "(void) ignores on purpose" c++ c++17 "" 'ein_ctx *c; (void)ein_ctx_create(&c);'
fi

echo "ein-test-summary: nodiscard: $passed passed, $failed failed"
[ "$failed" = 0 ]
