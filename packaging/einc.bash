# bash completion for einc (installed as completions/einc, where
# bash-completion loads it on the first Tab after "einc").
#
# Completes the commands, each command's options (the lists of its --help;
# tests/install_test.sh checks that every option --help names is offered),
# the values of --dtype, --backend, --reduce and --device, and .npy files
# as operands (eval's inputs; the other commands take one in place of a
# shape). Self-contained: it needs none of bash-completion's helpers.

_einc_commands="check plan eval bench cuda-src help"
_einc_dtypes="f32 f64 f16 bf16 c64 c128 i8 i16 i32 i64 u8 u16 u32 u64 bool float8_e4m3fn float8_e5m2"
_einc_common="-D --reduce --numpy -v --verbose -h --help --"

# The options of one command (the common ones included).
_einc_options() {
  case $1 in
    check) echo "$_einc_common" ;;
    plan) echo "--dtype --json --device --peak --bandwidth --memory-limit --backend --path --slice --plan-time --seed --objective --input --grad --resources --kernel-model --workers --link-gbps $_einc_common" ;;
    eval) echo "-o --output --print --dtype --scale --out-dtype --backend --path --slice --memory-limit --plan-time --seed --objective --devices --counters $_einc_common" ;;
    bench) echo "--dtype --backend --runs --warmup --no-floor --steps --json --counters --device --path --slice --memory-limit --plan-time --seed --objective $_einc_common" ;;
    cuda-src) echo "--dtype --path --slice --memory-limit --plan-time --seed --objective $_einc_common" ;;
  esac
}

# Values of an option that takes one; returns 1 for an option whose value
# is free text (a size, a binding), 2 for a file name, 3 for no option.
_einc_values() {
  case $1 in
    --dtype|--out-dtype) echo "$_einc_dtypes" ;;
    --backend) echo "auto cpu cuda emu" ;;
    --reduce) echo "sum mean max min prod any all" ;;
    --device) echo "cpu cuda h100 h100-sxm h100-pcie h200 a100 l4 b200" ;;
    --objective) echo "flops size combo" ;;
    -o | --output | --input) return 2 ;;
    -D | --runs | --warmup | --memory-limit | --peak | --bandwidth | --path | --slice | --workers | --link-gbps | --devices | --plan-time | --seed) return 1 ;;
    *) return 3 ;;
  esac
}

_einc_files() { # PATTERN WORD: matching files and every directory
  compopt -o filenames 2>/dev/null
  mapfile -t COMPREPLY < <(compgen -f -X "!$1" -- "$2"; compgen -d -- "$2")
}

_einc() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  # "--dtype=b" reaches us as "--dtype" "=" "b" ('=' breaks words).
  if [[ $cur == = ]]; then
    cur=
  elif [[ $prev == = ]] && ((COMP_CWORD > 1)); then
    prev=${COMP_WORDS[COMP_CWORD - 2]}
  fi
  COMPREPLY=()
  if ((COMP_CWORD == 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$_einc_commands --help --version" -- "$cur")
    return 0
  fi
  local command=${COMP_WORDS[1]}
  if [[ $command == help ]]; then
    ((COMP_CWORD == 2)) &&
      mapfile -t COMPREPLY < <(compgen -W "${_einc_commands% help}" -- "$cur")
    return 0
  fi
  local values status
  values=$(_einc_values "$prev")
  status=$?
  case $status in
    0) mapfile -t COMPREPLY < <(compgen -W "$values" -- "$cur"); return 0 ;;
    1) return 0 ;;
    2) _einc_files '*' "$cur"; return 0 ;;
  esac
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_einc_options "$command")" -- "$cur")
  elif ((COMP_CWORD > 2)); then
    _einc_files '*.npy' "$cur"
  fi
  return 0
}

complete -F _einc einc
