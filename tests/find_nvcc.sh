# find_nvcc.sh - sourced by the test scripts that compile kernels with
# nvcc: sets $nvcc to the toolkit's compiler (PATH first, then the
# toolkit's usual place) or to the empty string when there is none. Each
# caller decides what a missing nvcc means (skip, or fall back).
nvcc=$(command -v nvcc ||
  { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
