#!/usr/bin/env bash
# cli_test.sh EINC - drives the einc program: exit statuses, stdout, and the
# caret diagnostics on stderr, compared exactly.
set -u
EINC=${1:?usage: cli_test.sh path/to/einc}
passed=0 failed=0
out=$(mktemp) err=$(mktemp)
# the CPU's device model is measured once into this cache, not the user's
EINC_CACHE_DIR=$(mktemp -d)
export EINC_CACHE_DIR
trap 'rm -rf "$out" "$err" "$EINC_CACHE_DIR"' EXIT

# expect STATUS STDOUT STDERR -- ARGS...   (exact texts; '*' skips a stream)
expect() {
  local want_status=$1 want_out=$2 want_err=$3
  shift 4
  "$EINC" "$@" >"$out" 2>"$err"
  local status=$?
  local ok=1
  [ "$status" = "$want_status" ] || ok=0
  [ "$want_out" = '*' ] || [ "$(cat "$out")" = "$want_out" ] || ok=0
  [ "$want_err" = '*' ] || [ "$(cat "$err")" = "$want_err" ] || ok=0
  if [ $ok = 1 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL: einc %s\n  status %s (want %s)\n  stdout: %s\n  stderr: %s\n' \
      "$*" "$status" "$want_status" "$(cat "$out")" "$(cat "$err")" >&2
  fi
}

expect 0 "8x16x2048x2048" "" -- check 'b h i d, b h j d -> b h i j' 8x16x2048x128 8x16x2048x128
expect 0 "8x3x32x32" "" -- check 'b c (h 2) (w 2) -> b c h w' 8x3x64x64 --reduce mean
expect 0 "8x3x32x32" "" -- check --reduce=max 'b c (h 2) (w 2) -> b c h w' 8x3x64x64
expect 0 "4x5x3" "" -- check 'h w -> h w r' 4x5 -D r=3
expect 0 "4x5x3" "" -- check 'h w -> h w r' 4x5 -Dr=3
expect 0 "2x8x64" "" -- check 'b (heads d) -> b heads d' 2x512 -D heads=8
expect 0 "3x5" "" -- check --numpy 'ij,jk' 3x4 4x5
expect 0 "scalar" "" -- check 'i, i ->' 7 7
expect 0 "5" "" -- check 'a, -> a' 5 scalar
expect 0 "1024x512" "" -- check -- 'b i i -> b i' 1024x512x512
# an argument holding '->' or ',' is the expression even when it starts with
# '-'; '--' ends the options for any other
expect 0 "3" "" -- check '-> a' scalar -D a=3
expect 0 "scalar" "" -- check --numpy ',->' scalar scalar
expect 0 "scalar" "" -- check --numpy -- '->' scalar
expect 0 '*' "" -- plan '-> a' scalar -D a=3 --json
expect 2 "" "einc: error: unknown option '-x' for check (see einc check --help)" -- check -x 'a -> a' 3
expect 0 "2
  axis  size                  role
  b     2                     kept
  ...0  3                     reduced
  ...1  4                     reduced" "" -- check -v 'b ... -> b' 2x3x4
expect 0 "8x32x2048x128
  axis  size                  role
  b     8                     kept
  h     8                     kept
  s     2048                  kept
  d     128                   kept
  r     4                     repeated" "" -- check 'b h s d -> b (h r) s d' 8x8x2048x128 -D r=4 --verbose

# errors: caret diagnostics and exit status 2
expect 2 "" "einc: error: axis 'h' is 8 in operand 2 but 16 in operand 1
  b h i d, b h j d -> b h i j
    ^        ^" -- check 'b h i d, b h j d -> b h i j' 8x16x2048x128 8x8x2048x128
expect 2 "" "einc: error: cannot split dim 1 of operand 1 (size 10) into (h=? 3): 10 is not divisible by 3
  b (h 3) -> b h
    ^~~~~" -- check 'b (h 3) -> b h' 2x10
expect 2 "" "einc: error: nested parentheses are not allowed: a group is one level deep
  ((a)) -> a
  ^^" -- check '((a)) -> a' 4
expect 2 "" "einc: error: axis 'r' is in the output but in no input, so its size is unknown; give it with a length binding (r=N) or write a number
  h w -> h w r
             ^" -- check 'h w -> h w r' 4x5
expect 2 "" "einc: error: operand 1 names 2 dims but its tensor has 3 (shape 2x3x4)
  a b -> a
  ^~~" -- check 'a b -> a' 2x3x4
expect 2 "" "einc: error: the expression has 2 input operands but 1 tensor was given
  a, b -> a b
  ^~~~~" -- check 'a, b -> a b' 3
expect 2 "" "einc: error: groups '( )' are not part of the numpy dialect, where each letter is an axis; use the einops dialect (no --numpy) for them
  i(j)
   ^" -- check --numpy 'i(j)' 2x3
expect 2 "" "einc: error: the reduction 'max' takes a single operand, but the expression has 2; only 'sum' combines operands
  a, a ->
  ^~~~~~~" -- check 'a, a ->' 3 3 --reduce max

# UTF-8 axis names (Python identifiers, as einops takes): carets count
# characters, and check -v pads names by the columns they take
expect 0 "2x4" "" -- check 'α β, β γ -> α γ' 2x3 3x4
expect 2 "" "einc: error: axis 'β' is 4 in operand 2 but 3 in operand 1
  α β, β γ -> α γ
    ^  ^" -- check 'α β, β γ -> α γ' 2x3 4x5
expect 2 "" "einc: error: axis 'q' is in the output but in no input, so its size is unknown; give it with a length binding (q=N) or write a number
  形状 x -> x q
              ^" -- check '形状 x -> x q' 2x3
expect 2 "" "einc: error: unexpected '→'; expected an axis name, a number, '...', '(', ',' or '->'
  a → a
    ^" -- check 'a → a' 3
expect 0 "3
  axis  size                  role
  形状  2                     reduced
  x     3                     kept" "" -- check -v '形状 x -> x' 2x3

# usage errors
expect 2 "" "einc: error: bad shape '8xq': expected sizes of 0 or more (at most 9223372036854775807) separated by 'x', like 8x16x2048, or 'scalar' for a 0-d tensor" -- check 'a b -> a' 8xq
expect 2 "" "einc: error: bad shape '8x': expected sizes of 0 or more (at most 9223372036854775807) separated by 'x', like 8x16x2048, or 'scalar' for a 0-d tensor" -- check 'a b -> a' 8x
expect 2 "" "einc: error: bad shape '99999999999999999999': expected sizes of 0 or more (at most 9223372036854775807) separated by 'x', like 8x16x2048, or 'scalar' for a 0-d tensor" -- check 'a -> a' 99999999999999999999
expect 2 "" "einc: error: bad length binding 'r': expected NAME=SIZE, like r=4" -- check 'a -> a r' 3 -D r
expect 2 "" "einc: error: bad length binding 'r=x': the size must be an integer of 0 or more" -- check 'a -> a r' 3 -D r=x
expect 2 "" "einc: error: option -D needs a value" -- check 'a -> a r' 3 -D
expect 2 "" "einc: error: unknown reduction 'median': expected sum, mean, max, min, prod, any or all" -- check 'a -> ' 3 --reduce median
expect 2 "" "einc: error: unknown option '--frobnicate' for check (see einc check --help)" -- check --frobnicate 'a -> a' 3
expect 2 "" "einc: error: check needs an expression (see einc check --help)" -- check
expect 2 "" "einc: error: unknown command 'frob' (see einc --help)" -- frob
expect 2 "" "einc: error: the length binding z=3 names no axis of the expression" -- check 'a -> a' 3 -D z=3

# an einops-dialect error that binds in the numpy dialect: a hint, after the
# error; none where the numpy dialect fails too, or with --numpy already
HINT="einc: hint: the expression is valid in the numpy dialect (one letter per axis): did you mean --numpy?"
expect 2 "" "einc: error: operand 1 names 1 dim but its tensor has 2 (shape 3x4)
  ij,jk->ik
  ^~
$HINT" -- check 'ij,jk->ik' 3x4 4x5
expect 2 "" "einc: error: operand 1 names 1 dim but its tensor has 2 (shape 3x4)
  ij,jk->ik
  ^~
$HINT" -- plan 'ij,jk->ik' 3x4 4x5
expect 2 "" "einc: error: operand 1 names 1 dim but its tensor has 2 (shape 3x4)
  ij,jk->ik
  ^~" -- check 'ij,jk->ik' 3x4 5x5
expect 2 "" "einc: error: axis 'j' is 5 in operand 2 but 4 in operand 1
  ij,jk->ik
   ^ ^" -- check --numpy 'ij,jk->ik' 3x4 5x5

# --memory-limit: a path within it, a sliced one, or an error naming the
# sizes
expect 0 '*' "" -- plan 'a b, b c, c d -> a d' 100x10 10x100 100x10 --memory-limit 400
# plan --grad: a linear layer's backward is two contractions as costly as
# the forward (3x in all); the JSON's "grad" member; an integer dtype has
# no gradient and says why
expect 0 '*' "" -- plan 'b s d, d f -> b s f' 8x128x512 512x2048 --grad
if [ "$(tail -n 1 "$out")" = "total FLOPs     6.442e+09   3 x forward (a linear layer: 3, the '6 x parameters x tokens' rule)" ]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: plan --grad totals: $(tail -n 1 "$out")" >&2
fi
grad_json=$("$EINC" plan 'b s d, d f -> b s f' 8x128x512 512x2048 --grad --json |
  python3 -c 'import json, sys; g = json.load(sys.stdin)["grad"]
print(g["total_over_forward"], [s["expr"] for i in g["inputs"] for s in i["steps"]])')
if [ "$grad_json" = "3 ['b s f, d f -> b s d', 'b s f, b s d -> d f']" ]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: plan --grad --json: $grad_json" >&2
fi
expect 0 '*' "" -- plan 'a b -> a' 4x12 --dtype i32 --grad
grep -q 'input 0: no gradient: the inputs are i32' "$out" && passed=$((passed + 1)) ||
  { failed=$((failed + 1)); echo "FAIL: plan --grad of i32 says why" >&2; }
expect 0 '*' "" -- plan 'a b, b c, c d -> a d' 100x10 10x100 100x10 --memory-limit 399
"$EINC" plan 'a b, b c, c d -> a d' 100x10 10x100 100x10 --memory-limit 399 | grep -q '^sliced       d=10:2   2 slices' &&
  passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: --memory-limit 399 is not sliced over d in 2 chunks (the fewest the limit allows)" >&2; }
# chunked slices: A:N slices A into N chunks; N must divide A's size
# --workers: the spread cost (its arithmetic: test_units); JSON member and errors
spread=$("$EINC" plan 'a b, b c -> a c' 4x6 6x8 --slice a:2,b:3 --workers 4 --link-gbps 2 --json |
  python3 -c 'import json, sys; s = json.load(sys.stdin)["spread"]; print(s["workers"], s["units"], s["units_per_worker"], s["link_gbps"])')
[ "$spread" = "4 6 2 2" ] && passed=$((passed + 1)) ||
  { failed=$((failed + 1)); echo "FAIL: plan --workers 4 --json: $spread" >&2; }
expect 2 '' "einc: error: --workers takes a count from 1, not '0'" -- plan 'a b -> a' 4x6 --workers 0
expect 2 '' "einc: error: --link-gbps takes a bandwidth in GB/s above 0, not 'x'" -- plan 'a b -> a' 4x6 --workers 2 --link-gbps x
expect 2 '' "einc: error: --devices takes a count from 1 to 16, not '0'" -- eval 'i j -> i' x.npy -o y.npy --devices 0
expect 2 '' "einc: error: slice_axes 'b:4': 'b:4' asks for 4 slices of an axis of size 6; the count must divide the size" -- plan 'a b, b c -> a c' 4x6 6x8 --slice b:4
expect 2 '*' '*' -- plan 'a b, b c -> a c' 4x6 6x8 --slice b:0
"$EINC" plan 'a b, b c -> a c' 4x6 6x8 --slice b:3,a:2 | grep -q '^sliced       a=4:2 b=6:3(sum)   6 slices of 64 FLOPs' &&
  passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: --slice b:3,a:2 is not 6 chunked slices" >&2; }
expect 2 "" "einc: error: no contraction order keeps every intermediate within the memory limit of 39 bytes: the contraction's best order needs 400 bytes (100 elements of f32) for its largest intermediate, and even slicing every axis leaves one of 40 bytes; a limit of 40 bytes would fit" -- plan 'a b, b c, c d -> a d' 100x10 10x100 100x10 --memory-limit 39

# --input: the expression and shapes from a file or standard input print
# the same plan as the arguments; comments and blank lines are skipped
work=$(mktemp -d)
printf '# three operands\n\n  a b, b c, c d -> a d  \n100x10\n\n10x100\n100x10\n' >"$work/in.txt"
"$EINC" plan 'a b, b c, c d -> a d' 100x10 10x100 100x10 >"$work/args.out"
for src in "$work/in.txt" -; do
  if "$EINC" plan --input "$src" <"$work/in.txt" | cmp -s - "$work/args.out"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "FAIL: plan --input $src differs from the arguments" >&2
  fi
done
expect 2 "" "einc: error: --input gives the expression and the shapes; 'a b -> a' cannot come beside it" -- plan --input "$work/in.txt" 'a b -> a'
expect 1 "" "einc: error: cannot read --input '$work/none.txt'" -- plan --input "$work/none.txt"
printf '# nothing\n\n' >"$work/empty.txt"
expect 2 "" "einc: error: --input '$work/empty.txt' holds no expression (the first line that is not blank or a comment)" -- plan --input "$work/empty.txt"
rm -rf "$work"

# every option that takes a value takes it as '--opt value' and '--opt=value'
# alike: both spellings print the same
same() { # same ARGS... :: ARGS...
  local -a x=() y=()
  while [ "$1" != :: ]; do x+=("$1"); shift; done
  shift
  y=("$@")
  local a b
  a=$("$EINC" "${x[@]}" 2>&1; echo "status $?")
  b=$("$EINC" "${y[@]}" 2>&1; echo "status $?")
  if [ "$a" = "$b" ] && [ "${a##*status }" = 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL: spellings differ or fail: %s\n  %s\n  %s\n' "${y[*]}" "$a" "$b" >&2
  fi
}
mm=('a b, b c -> a c' 4x5 5x6)
same plan "${mm[@]}" --dtype f16 --backend cuda --device h200 :: plan "${mm[@]}" --dtype=f16 --backend=cuda --device=h200
same plan "${mm[@]}" --memory-limit 96 :: plan "${mm[@]}" --memory-limit=96
same plan "a b -> a" 4x5 --json --reduce max :: plan "a b -> a" 4x5 --json --reduce=max
same check 'h w -> h w r' 4x5 -D r=3 :: check 'h w -> h w r' 4x5 -D=r=3
same cuda-src 'a b -> b a' 64x32 --dtype f16 :: cuda-src 'a b -> b a' 64x32 --dtype=f16
expect 2 "" "einc: error: --memory-limit takes a byte count (4096, 512M, 2G) or 'free' (the device's free memory), not 'x'" -- plan "${mm[@]}" --memory-limit=x
expect 2 "" "einc: error: unknown dtype 'q8' (f32, f64, f16, bf16, c64, c128, i8..i64, u8..u64, bool, float8_e4m3fn, float8_e5m2)" -- cuda-src 'a -> a' 4 --dtype=q8

# The order search's options (issue 26): --objective size lowers the
# largest intermediate where the FLOPs-optimal order's is large; --seed and
# --plan-time are taken in both spellings; bad values name what is wanted.
obj=('b h d, a i f, h d g b, f e c, e c g j, j i -> a' 9x5x2 2x2x5 5x2x4x9 5x8x7 8x7x4x9 9x2)
for o in 'flops 504' 'size 112' 'combo 112'; do
  "$EINC" plan "${obj[@]}" --objective ${o% *} | grep -q "^largest intermediate  ${o#* } elements" &&
    passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: --objective ${o% *}: largest not ${o#* } elements" >&2; }
done
ring=$(for k in $(seq 0 19); do printf 'r%d r%d, ' $k $(((k + 1) % 20)); done)
ring=("${ring%, } ->" $(for k in $(seq 0 19); do printf '2x2 '; done))
same plan "${ring[@]}" --seed 5 --plan-time 0.01 :: plan "${ring[@]}" --seed=5 --plan-time=0.01
same plan "${ring[@]}" --objective=size :: plan "${ring[@]}" --objective size
expect 2 "" "einc: error: unknown objective 'memory': expected flops, size or combo" -- plan "${mm[@]}" --objective memory
expect 2 "" "einc: error: --plan-time takes seconds (0 or more, e.g. 0.5), not '-1'" -- plan "${mm[@]}" --plan-time=-1
expect 2 "" "einc: error: --seed takes a whole number from 0 to 2^64-1, not 'x'" -- plan "${mm[@]}" --seed x
# bench's time varies: both spellings run, with the dtype and backend named
for form in '--dtype=f64 --backend=cpu --runs=2 --warmup=1' '--dtype f64 --backend cpu --runs 2 --warmup 1'; do
  # shellcheck disable=SC2086
  "$EINC" bench 'a -> a' 4 $form | grep -q '(f64 on cpu' && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: bench $form" >&2; }
done
expect 2 "" "einc: error: --runs takes a count from 1 to 100000, not '0'" -- bench 'a -> a' 4 --runs=0

# help and version
expect 0 '*' "" -- --help
expect 0 '*' "" -- help check
expect 0 '*' "" -- check --help
expect 0 "einc 0.1.0" "" -- --version
expect 2 '*' "" --
"$EINC" --help | grep -q '^  check ' && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: --help lists check" >&2; }
"$EINC" check --help | grep -q -- '--reduce R' && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: check --help documents --reduce" >&2; }

for cmd in check plan eval bench cuda-src; do
  for h in -h --help; do
    "$EINC" $cmd $h | grep -q "^usage: einc $cmd " && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: einc $cmd $h" >&2; }
  done
done
for cmd in plan eval bench cuda-src; do
  "$EINC" $cmd --help | grep -q -- "--reduce, --numpy, --)" && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: $cmd --help points at --" >&2; }
done
"$EINC" check --help | grep -q -- "holding '->' or ','" && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: check --help says what is an operand" >&2; }

# bench --steps on the CPU: one line per plan step (two here) with
# its measured and predicted time and a share; the shares sum to ~100%,
# and the JSON carries the same
chain=('a b, b c, c d -> a d' 20x30 30x40 40x5 --backend cpu --runs 3 --warmup 1 --steps)
text=$("$EINC" bench "${chain[@]}" 2>&1)
lines=$(printf '%s\n' "$text" | grep -cE '^  [0-9]+ +[a-z]+ \([a-z]+\) +[0-9.]+ (ns|µs|ms|s) +[0-9.]+ (ns|µs|ms|s) +[0-9.]+%$')
sum=$(printf '%s\n' "$text" | awk '/^  [0-9]+ / { sub("%", "", $NF); s += $NF } END { printf "%.1f", s }')
if [ "$lines" = 2 ] && awk -v s="$sum" 'BEGIN { exit !(s > 99.5 && s < 100.5) }' &&
   printf '%s\n' "$text" | grep -q '^steps    median of 3 marked runs' &&
   printf '%s\n' "$text" | grep -qE '^GEMMs    [0-9.]+ (ns|µs|ms|s) in the 1 GEMM step alone; einc/GEMMs [0-9.]+ '; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  printf 'FAIL: bench --steps text (%s step lines, shares %s%%):\n%s\n' "$lines" "$sum" "$text" >&2
fi
if command -v python3 >/dev/null; then
  "$EINC" bench "${chain[@]}" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
st = d["steps"]
assert d["steps_runs"] == 3, d
assert [s["step"] for s in st] == [1, 2], st
assert all(s["kind"] and s["ms"] > 0 and s["predicted_ms"] > 0 for s in st), st
assert abs(sum(s["share"] for s in st) - 1) < 1e-3, st
assert abs(sum(s["ms"] for s in st) - d["steps_ms"]) < 1e-3 * d["steps_ms"], d
' && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: bench --steps --json" >&2; }
  # the GEMM steps alone: their sum, and all steps over it in the same runs
  "$EINC" bench 'a b, b c, c d -> a d' 32x32 32x48 48x32 --backend cpu --runs 3 --warmup 1 --steps --json --no-floor | python3 -c '
import json, sys
d = json.load(sys.stdin)
g = [s["ms"] for s in d["steps"] if s["kind"] == "gemm"]
assert d["gemm_steps"] == len(g) == 2, d
assert abs(sum(g) - d["gemm_ms"]) < 1e-3 * d["gemm_ms"], d
assert abs(d["gemm_ratio"] - d["steps_ms"] / d["gemm_ms"]) < 1e-3 * d["gemm_ratio"], d
' && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: bench --steps --json: gemm_ms" >&2; }
  "$EINC" bench 'a b -> b a' 64x48 --backend cpu --runs 2 --warmup 0 --steps --json --no-floor | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["gemm_steps"] == 0 and d["gemm_ms"] is None and d["gemm_ratio"] is None, d
' && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: bench --steps --json: no GEMM, gemm_ms null" >&2; }
  "$EINC" bench "${chain[@]}" --json --no-floor | python3 -c '
import json, sys
st = json.load(sys.stdin)["steps"]
assert len(st) == 2 and all(s["predicted_ms"] is None for s in st), st
' && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: bench --steps --no-floor: predicted null" >&2; }
fi
"$EINC" bench 'a -> a' 4 --backend cpu --runs 1 --json | grep -q '"steps"' && { failed=$((failed + 1)); echo "FAIL: steps without --steps" >&2; } || passed=$((passed + 1))
# bench's device model lines (issue 28): the predicted time beside the
# measured one, MFU over the CPU model's peak, HFU where slicing changes
# the plan's FLOPs; the JSON's MFU is the expression's FLOPs per second
# over the peak
"$EINC" bench 'i j, j k -> i k' 64x64 64x64 --backend cpu --runs 2 --no-floor >"$out" 2>"$err"
grep -qE '^model    predicted [0-9.]+ (ns|µs|ms|s) on cpu \(measured/predicted [0-9.e+-]+\)$' "$out" &&
  grep -qE '^MFU      [0-9.e+-]+% of f32 [0-9.e+-]+ TFLOP/s \(measured peak, (measured|raised to this run.s rate) (20[0-9-]+ [0-9:]+ UTC|unknown): no data sheet\)$' "$out" &&
  ! grep -q HFU "$out" && passed=$((passed + 1)) ||
  { failed=$((failed + 1)); echo "FAIL: bench model lines: $(cat "$out" "$err")" >&2; }
"$EINC" bench 'i j, j k -> i k' 64x64 64x64 --backend cpu --runs 2 --no-floor --slice j >"$out" 2>"$err"
grep -qE '^MFU .*; HFU [0-9.e+-]+% \(the plan does 5.202e\+05 FLOPs, the expression needs 5.243e\+05\)$' "$out" &&
  passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: bench HFU of a sliced plan: $(cat "$out" "$err")" >&2; }
"$EINC" bench 'i j, j k -> i k' 64x64 64x64 --backend cpu --runs 2 --no-floor --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["device_model"] == "cpu" and d["predicted_ms"] > 0 and d["peak_kind"] == "f32", d
assert abs(d["mfu"] / (d["model_flops"] / (d["ms"] * 1e-3) / d["peak_flops"]) - 1) < 1e-4, d
assert d["hfu"] == d["mfu"], d
# issue 35: the measured peak says when, and a run never reads above it
assert d["peak_measured_at"].endswith(" UTC") and d["peak_raised"] in (True, False), d
assert d["mfu"] <= 1, d
' && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: bench --json mfu" >&2; }

# Exit statuses, one class per row for every command: 0 success, 1 runtime
# failure (I/O, device, memory), 2 usage or expression error.
tmp=$(mktemp -d)
trap 'rm -f "$out" "$err"; rm -rf "$tmp"' EXIT
# write_npy FILE SHAPE BYTES: a version-1 .npy of f32 zeros
write_npy() {
  local dict="{'descr': '<f4', 'fortran_order': False, 'shape': $2, }"
  local pad=$(( (64 - (10 + ${#dict} + 1) % 64) % 64 ))
  local hlen=$(( ${#dict} + 1 + pad ))
  { printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $((hlen >> 8)))"
    printf '%s%*s\n' "$dict" $pad ''
    head -c "$3" /dev/zero; } > "$1"
}
write_npy "$tmp/v.npy" '(4,)' 16
status_is() { # status_is WANT ARGS...
  local want=$1
  shift
  "$EINC" "$@" >/dev/null 2>"$err" </dev/null
  local got=$?
  if [ "$got" = "$want" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL: einc %s: status %s, want %s\n  %s\n' "$*" "$got" "$want" "$(cat "$err")" >&2
  fi
}
have_gpu=0
nvidia-smi -L >/dev/null 2>&1 && have_gpu=1
missing="$tmp/missing.npy"
quick=(--runs 1 --warmup 0 --no-floor --backend cpu)
# check
status_is 0 check 'a -> a' "$tmp/v.npy"
status_is 1 check 'a -> a' "$missing"
status_is 2 check 'a -> a' 4 --bogus
status_is 2 check 'a -> a b' 4
# plan
status_is 0 plan 'a -> a' "$tmp/v.npy"
status_is 1 plan 'a -> a' "$missing"
status_is 2 plan 'a -> a' 4 --dtype q8
status_is 2 plan 'a, a -> a' 4 5
# eval: I/O both ways, host memory, and the device where there is none
status_is 0 eval 'a -> a' "$tmp/v.npy" -o "$tmp/o.npy"
status_is 1 eval 'a -> a' "$missing" -o "$tmp/o.npy"
status_is 1 eval 'a -> a' "$tmp/v.npy" -o "$tmp/no/such/dir.npy"
status_is 1 eval 'a -> a r' "$tmp/v.npy" -D r=1000000000000000 -o "$tmp/o.npy"
[ $have_gpu = 1 ] || status_is 1 eval 'a -> a' "$tmp/v.npy" --print --backend cuda
status_is 2 eval 'a -> a' "$tmp/v.npy"
status_is 2 eval 'a b -> a' "$tmp/v.npy" --print
printf 'junk' > "$tmp/junk.npy"
status_is 2 eval 'a -> a' "$tmp/junk.npy" --print
# bench
status_is 0 bench 'a -> a' 4 "${quick[@]}"
status_is 1 bench 'a -> a' "$missing" "${quick[@]}"
[ $have_gpu = 1 ] || status_is 1 bench 'a -> a' 4 --runs 1 --backend cuda
status_is 2 bench 'a -> a' 4 --backend emu
status_is 2 bench 'a -> a' 4 --runs=0
status_is 2 bench 'a ->' 4 5 "${quick[@]}"
# cuda-src (plans for CUDA without a GPU; a build without CUDA has no
# CUDA plans, a device failure)
if "$EINC" cuda-src 'a -> a' 4 >/dev/null 2>&1; then
  status_is 0 cuda-src 'a -> a' "$tmp/v.npy"
else
  status_is 1 cuda-src 'a -> a' 4
fi
status_is 1 cuda-src 'a -> a' "$missing"
status_is 2 cuda-src 'a -> a' 4 --frob
status_is 2 cuda-src 'a -> (a' 4
# The device of predicted times: the CPU's own rates, measured by the first
# 3 processes (the best of each rate kept) into the cache and read from it
# after; a damaged entry is measured again.
# pass_if COND-STATUS MESSAGE
pass_if() {
  if [ "$1" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2" >&2; fi
}
models=$tmp/models # a cache of its own: the plans above measured already
model_of() { # the "device_model" object of a JSON plan
  EINC_CACHE_DIR=$models "$EINC" plan "$@" --json | grep -o '"device_model":{[^}]*}'
}
copy=('a b -> (b a)' 1000x1000) # a real copy: 'a b -> b a' is a view (0 bytes)
first=$(model_of "${copy[@]}")
model_of "${copy[@]}" >/dev/null
third=$(model_of "${copy[@]}")
fourth=$(model_of "${copy[@]}")
case $first in *'"name":"cpu"'*'"source":"measured"'*) r=0 ;; *) r=1 ;; esac
pass_if $r "the first CPU plan measures the CPU: $first"
pass_if "$([ "${fourth/\"source\":\"cache\"/\"source\":\"measured\"}" = "$third" ] && echo 0)" \
  "the fourth reads the third's rates from the cache: $fourth"
entry=$(ls "$models" | head -1)
printf 'XXXX' | dd of="$models/$entry" bs=1 seek=70 conv=notrunc 2>/dev/null
case $(model_of "${copy[@]}") in *'"source":"measured"'*) r=0 ;; *) r=1 ;; esac
pass_if $r "a damaged cache entry is measured again"
# the text names the device, its rates and where they come from; --device
# picks another, and a GPU device plans for the cuda backend
"$EINC" plan "${copy[@]}" >"$out"
grep -qE '^predicted    [0-9.]+ (ns|µs|ms|s) on cpu: .+, [0-9]+ threads?$' "$out" &&
  grep -qE '^             = 1.4 µs per call \+ 300 ns per step \+ roofline at f32 [0-9.]+ [GMT]FLOP/s \(measured\) and [0-9.]+ [GMT]B/s \(measured\)$' "$out"
pass_if $? "plan on the CPU predicts for the CPU: $(grep -A1 predicted "$out")"
expect 0 '*' "" -- plan "${copy[@]}" --device h100
grep -qx 'predicted    8.3 µs on h100: NVIDIA H100 SXM5 80GB' "$out" &&
  grep -qx '             = 3.1 µs per call + 2.5 µs per step + roofline at f32 51 TFLOP/s (measured; data sheet 67 TFLOP/s) and 2.96 TB/s (measured; data sheet 3.35 TB/s)' "$out" &&
  grep -qx 'MFU peak     f32 67 TFLOP/s (data sheet, dense)' "$out" &&
  grep -q '^dtype .* backend cuda$' "$out"
pass_if $? "--device h100: $(grep -A2 predicted "$out")"
expect 0 '*' "" -- plan "${copy[@]}" --device=h200
grep -qx 'predicted    7.27 µs on h200: NVIDIA H200 SXM 141GB' "$out"
pass_if $? "--device h200: $(grep predicted "$out")"
for d in h100-sxm h100-pcie a100 l4 b200; do
  expect 0 '*' "" -- plan "${copy[@]}" --device $d --json
done
expect 0 '*' "" -- plan "${copy[@]}" --device l4 --peak 1e12 --bandwidth 1e11
grep -qx '             = 3.1 µs per call + 2.5 µs per step + roofline at f32 1 TFLOP/s (given) and 100 GB/s (given)' "$out" &&
  grep -qx 'predicted    85.6 µs on l4: NVIDIA L4 24GB' "$out" &&
  grep -qx 'MFU peak     f32 1 TFLOP/s (given)' "$out"
pass_if $? "--peak and --bandwidth replace the model's: $(grep -A2 predicted "$out")"
expect 2 "" "einc: error: --peak takes a positive rate (FLOP/s: 989.5e12), not '-3'" -- plan "${copy[@]}" --peak -3
# the CPU's prediction is its overheads and its bytes over its measured
# bandwidth (a copy is memory bound)
json=$(EINC_CACHE_DIR=$models "$EINC" plan "${copy[@]}" --device cpu --json)
num() { printf '%s' "$json" | grep -o "\"$1\":[0-9.e+-]*" | head -1 | cut -d: -f2; }
bw=$(num bytes_per_s) pred=$(num predicted_seconds) call=$(num call_seconds) step=$(num step_seconds)
awk -v p="$pred" -v b="$bw" -v c="$call" -v s="$step" 'BEGIN { exit !(b > 0 && c > 0 && s > 0 && ((p - c - s) * b / 8e6 - 1) ^ 2 < 1e-8) }'
pass_if $? "--device cpu: predicted $pred s is $call + $step s + 8 MB over $bw B/s"
expect 2 "" "einc: error: unknown device model 'tpu' (cpu, cuda, h100 (= h100-sxm), h100-pcie, h200, a100, l4, b200)" -- plan "${copy[@]}" --device tpu
expect 2 "" "einc: error: the device model 'h100' prices cuda plans, not --backend cpu's" -- plan "${copy[@]}" --device h100 --backend cpu
expect 2 "" "einc: error: the device model 'cpu' prices cpu plans, not --backend emu's" -- plan "${copy[@]}" --device cpu --backend emu
# CUDA: the GPU present, or h100's rates with a note; --device names one
"$EINC" plan "${copy[@]}" --backend cuda >"$out" 2>"$err"
if [ $have_gpu = 1 ]; then
  grep -qE '^predicted .* on (h100|h100-pcie|h200|a100|l4|b200): NVIDIA ' "$out" || grep -q '^einc: note: predicted times are for h100: .* has no model in einc' "$err"
else
  grep -qx "einc: note: predicted times are for h100: no CUDA GPU found: h100's rates assumed" "$err" &&
    grep -q "on h100: no CUDA GPU found" "$out"
fi
pass_if $? "--backend cuda predicts for the GPU present: $(grep predicted "$out") $(cat "$err")"
expect 0 '*' "" -- plan "${copy[@]}" --backend emu --device h200
grep -q '^predicted    7.27 µs on h200: NVIDIA H200' "$out"
pass_if $? "--backend emu --device h200"

# --path: the order given instead of the search's, shown as given; the
# linear path a plan prints, given back, makes the same plan
chain3=('a b, b c, c d -> a d' 100x10 10x100 100x10)
expect 0 '*' "" -- plan "${chain3[@]}" --device h100 --path '[(0, 1), (0, 1)]'
grep -qx 'path         given (0,1) (2,3)' "$out" && grep -qx '             as opt_einsum: \[(0, 1), (0, 1)\]' "$out"
pass_if $? "plan --path shows the order given: $(grep -A1 '^path' "$out")"
for net in 'a b, b c, c d, d e -> a e 10x20 20x30 30x40 40x50' 'i j, j k, k l, l i -> 6x7 7x8 8x9 9x6' 'b h i d, b h j d, b h j e -> b h i e 2x3x4x5 2x3x6x5 2x3x6x7'; do
  read -r -a words <<<"${net% ->*}"
  expr="${net%% [0-9]*x*}"
  shapes="${net#"$expr" }"
  # shellcheck disable=SC2086
  searched=$("$EINC" plan "$expr" $shapes --device h100)
  lin=$(printf '%s\n' "$searched" | sed -n 's/^ *as opt_einsum: //p')
  # shellcheck disable=SC2086
  given=$("$EINC" plan "$expr" $shapes --device h100 --path "$lin")
  want=$(printf '%s\n' "$searched" | sed -E 's/^path         [a-z+-]+ /path         given /')
  pass_if "$([ -n "$lin" ] && [ "$given" = "$want" ] && echo 0)" "round trip of $lin on $expr:
$searched
$given"
done
same plan "${chain3[@]}" --path '[(1, 2), (0, 1)]' :: plan "${chain3[@]}" --path='[[1,2],[0,1]]'
same cuda-src "${chain3[@]}" --path '[(1, 2), (0, 1)]' :: cuda-src "${chain3[@]}" --path='[[1, 2], [0, 1]]'
"$EINC" cuda-src "${chain3[@]}" --path '[(0, 1), (0, 1)]' >/dev/null 2>&1
r1=$?
"$EINC" cuda-src "${chain3[@]}" >/dev/null 2>&1
pass_if "$([ $r1 = $? ] && echo 0)" "cuda-src takes --path"
status_is 0 bench "${chain3[@]}" --path '[(0, 2), (0, 1)]' "${quick[@]}"
expect 2 "" "einc: error: path '[(0, 1)]' has 1 contraction, but 3 operands need 2" -- plan "${chain3[@]}" --path '[(0, 1)]'
expect 2 "" "einc: error: path '[(0, 3), (0, 1)]': contraction 1 names operand 3, but only 3 operands are left at that point (0 to 2)" -- plan "${chain3[@]}" --path '[(0, 3), (0, 1)]'
expect 2 "" "einc: error: path '[(0 1), (0, 1)]': expected ',' or ')' at character 5; give opt_einsum's linear form, e.g. [(0, 1), (0, 1)]" -- eval 'a, a, a -> a' "$tmp/v.npy" "$tmp/v.npy" "$tmp/v.npy" --print --path '[(0 1), (0, 1)]'
same eval 'a, a, a -> a' "$tmp/v.npy" "$tmp/v.npy" "$tmp/v.npy" --print --path '[(0, 2), (0, 1)]' :: eval 'a, a, a -> a' "$tmp/v.npy" "$tmp/v.npy" "$tmp/v.npy" --print
expect 2 "" "einc: error: path '[(0, 1, 2)]': contraction 1 names 3 operands; einc contracts two at a time, (i, j)" -- bench "${chain3[@]}" --path '[(0, 1, 2)]' "${quick[@]}"
status_is 2 check 'a -> a' 4 --path '[]'
# the program itself
status_is 0 --help
status_is 0 --version
status_is 2
status_is 2 frob
status_is 2 help frob
"$EINC" --help | grep -q '^Exit status: 0 success; 1 runtime failure' && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: --help documents the exit statuses" >&2; }
for cmd in check plan eval bench cuda-src; do
  "$EINC" $cmd --help | grep -q '^Exit status: 0 success; 1 runtime failure' && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: $cmd --help documents the exit statuses" >&2; }
done

echo "ein-test-summary: cli: $passed passed, $failed failed"
[ "$failed" = 0 ]
