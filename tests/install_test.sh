#!/usr/bin/env bash
# install_test.sh - what `meson install` puts in place, used as a user
# would: installs the build into a staging directory (DESTDIR, no root),
# then
#   - checks the files are where they belong (library and its soname link,
#     ein.h, ein.pc, einConfig.cmake + einConfigVersion.cmake, einc, the man
#     page, the bash completion);
#   - builds tests/install/hello.c with pkg-config (shared, and static with
#     --static against libein.a) and with CMake's find_package(ein), and
#     runs each against the staged library;
#   - renders einc(1) with groff (or man -l), warnings counted as failures;
#   - sources the bash completion: `einc ev` completes to eval, option
#     values complete, and every option of every command's --help is
#     offered.
#
# usage: install_test.sh BUILD_DIR TEST_SRC_DIR VERSION PREFIX LIBDIR
#                        INCLUDEDIR MANDIR COMPLETIONS_DIR CC [CMAKE]
# (directories absolute, as configured; CMAKE empty when cmake is absent).
# EINC_TEST_CFLAGS: flags the test programs need too (a sanitizer).
# Functions below run through check(), which shellcheck cannot follow.
# shellcheck disable=SC2317
set -u
build=$1 src=$2 version=$3 prefix=$4 libdir=$5 includedir=$6 mandir=$7
completions=$8 cc=$9 cmake=${10:-}
read -r -a cflags <<<"${EINC_TEST_CFLAGS:-}"
stage=$build/install-stage
work=$build/install-work
passed=0 failed=0

ok() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }
check() { # NAME COMMAND...: passes when COMMAND succeeds
  local name=$1
  shift
  if "$@" >"$work/last.log" 2>&1; then ok "$name"; else
    fail "$name"; sed 's/^/     /' "$work/last.log" | head -40
  fi
}
finish() {
  echo "ein-test-summary: install: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
}

rm -rf "$stage" "$work"
mkdir -p "$work"
check "meson install --destdir" \
  meson install -C "$build" --no-rebuild --destdir "$stage"
[ "$failed" = 0 ] || finish

lib=$stage$libdir
check_file() { check "installed: ${1#"$stage"}" test -e "$1"; }
for f in "$lib/libein.so.$version" "$lib/libein.so.0" "$lib/libein.so" \
  "$lib/libein.a" "$stage$includedir/ein.h" "$lib/pkgconfig/ein.pc" \
  "$lib/cmake/ein/einConfig.cmake" "$lib/cmake/ein/einConfigVersion.cmake" \
  "$stage$prefix/bin/einc" "$stage$mandir/man1/einc.1" \
  "$stage$completions/einc"; do
  check_file "$f"
done
soname_is() { readelf -d "$1" | grep -q "(SONAME).*\[$2\]"; }
if command -v readelf >/dev/null; then
  check "soname libein.so.0" soname_is "$lib/libein.so.$version" libein.so.0
fi

# --- pkg-config ------------------------------------------------------------

expected="ein $version (header $version)
row sums 3 12
missing length: error: axis 'k' is in the output but in no input, so its size is unknown; give it with a length binding (k=N) or write a number
  i j -> i k
           ^"
expect_run() { # PROGRAM: runs it on the staged library, compares its output
  local got
  got=$(LD_LIBRARY_PATH=$lib "$1" 2>&1) || { echo "$got"; return 1; }
  [ "$got" = "$expected" ] ||
    { diff <(echo "$expected") <(echo "$got"); return 1; }
  # the library it loaded is the staged one
  [ -z "$2" ] || LD_LIBRARY_PATH=$lib ldd "$1" | grep -q "$lib/libein.so.0"
}

# The staged ein.pc names the configured prefix; pointed at the staging
# directory it is the file a user of that prefix has. (PKG_CONFIG_SYSROOT_DIR
# would also move the paths of ein.pc's own requirements, such as openblas.)
mkdir -p "$work/pc"
sed "s|^prefix=.*|prefix=$stage$prefix|" "$lib/pkgconfig/ein.pc" \
  >"$work/pc/ein.pc"
export PKG_CONFIG_PATH=$work/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
pc_build() { # OUT [--static]
  local flags
  local static=${2:-}
  flags=$(pkg-config --cflags --libs $static ein) || return 1
  # --static: libein.a itself, with what its Libs.private names
  [ -z "$static" ] || flags=${flags//-lein/-l:libein.a}
  echo "$cc -std=c17 -Wall -Wextra -Werror ${cflags[*]} $src/hello.c -o $1 $flags"
  # shellcheck disable=SC2086
  "$cc" -std=c17 -Wall -Wextra -Werror "${cflags[@]}" "$src/hello.c" -o "$1" \
    $flags
}
if command -v pkg-config >/dev/null; then
  check "pkg-config --modversion ein is $version" \
    test "$(pkg-config --modversion ein)" = "$version"
  check "pkg-config: build hello.c" pc_build "$work/hello-pc"
  check "pkg-config: run hello (shared)" expect_run "$work/hello-pc" ldd
  check "pkg-config --static: build hello.c against libein.a" \
    pc_build "$work/hello-static" --static
  check "pkg-config --static: run hello" expect_run "$work/hello-static" ""
else
  echo "skip pkg-config checks: pkg-config is not installed"
fi

# --- CMake -----------------------------------------------------------------

cmake_build() {
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  "$cmake" -S "$src" -B "$work/cmake" "${gen[@]}" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${cflags[*]}" \
    -DCMAKE_PREFIX_PATH="$stage$prefix" &&
    "$cmake" --build "$work/cmake"
}
if [ -n "$cmake" ]; then
  check "cmake: find_package(ein) and build hello.c" cmake_build
  check "cmake: run hello" expect_run "$work/cmake/hello" ldd
else
  echo "skip CMake checks: cmake is not installed"
fi

# --- the man page ----------------------------------------------------------

man_page=$stage$mandir/man1/einc.1
renders() { # a rendering with no warnings that has every section
  local text
  if command -v groff >/dev/null; then
    text=$(groff -man -Tutf8 -P-cbou -ww "$man_page" 2>"$work/man.err") || return 1
  else
    text=$(MANWIDTH=80 man -l "$man_page" 2>"$work/man.err") || return 1
  fi
  if [ -s "$work/man.err" ]; then cat "$work/man.err"; return 1; fi
  for section in NAME SYNOPSIS DESCRIPTION COMMANDS "EXIT STATUS"; do
    grep -q "^$section" <<<"$text" || { echo "no section $section"; return 1; }
  done
}
if command -v groff >/dev/null || command -v man >/dev/null; then
  check "man page einc(1) renders without warnings" renders
else
  echo "skip man page rendering: neither groff nor man is installed"
fi

# --- bash completion -------------------------------------------------------

einc=$stage$prefix/bin/einc
complete_words() { # WORDS...: what the completion offers for the last word
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
           _einc; printf "%s\n" "${COMPREPLY[@]}"' _ "$stage$completions/einc" "$@"
}
completes_to() { # EXPECTED WORDS...
  local want=$1 got
  shift
  got=$(complete_words "$@" | sort | tr '\n' ' ')
  [ "$got" = "$want " ] || { echo "'$*' completed to '$got', not '$want'"; return 1; }
}
check "completion: einc ev -> eval" completes_to eval einc ev
check "completion: einc plan --dtype b -> bf16 bool" \
  completes_to "bf16 bool" einc plan --dtype b
check "completion: einc plan --dtype=f1 -> f16" \
  completes_to f16 einc plan --dtype = f1
check "completion: einc check --re -> --reduce" \
  completes_to --reduce einc check --re
check "completion: einc eval x --backend e -> emu" \
  completes_to emu einc eval x --backend e

# The options a command's --help lists: option lines ("  -o, --output F  ...")
# and the shared ones it refers to ("(see einc check --help for -D, ...)").
help_options() {
  "$einc" "$1" --help | sed -nE \
    -e 's/^  (-[^ ].*)$/\1/p' -e 's/^  \(see einc [a-z-]+ --help for (.*)\)$/\1/p' |
    sed -E 's/   .*//; s/  [a-z(].*//' | tr ', ' '\n\n' | grep -E '^-' | sort -u
}
help_commands() { "$einc" --help | sed -nE '/^commands:/,/^$/s/^  ([a-z-]+) .*/\1/p'; }
offers_every_option() { # COMMAND
  local offered missing=
  offered=$(complete_words einc "$1" -)
  for opt in $(help_options "$1"); do
    grep -qxF -- "$opt" <<<"$offered" || missing="$missing $opt"
  done
  [ -z "$missing" ] || { echo "einc $1 --help lists$missing; the completion does not offer it"; return 1; }
}
offers_every_command() {
  local offered missing=
  offered=$(complete_words einc "")
  for command in $commands help --help --version; do
    grep -qxF -- "$command" <<<"$offered" || missing="$missing $command"
  done
  [ -z "$missing" ] || { echo "the completion does not offer$missing"; return 1; }
}
commands=$(help_commands)
check "completion: every command of einc --help is offered" offers_every_command
for command in $commands; do
  check "completion: every option of einc $command --help is offered" \
    offers_every_option "$command"
done

finish
