#!/usr/bin/env bash
# Installs the Debian 12 packages kiln needs to build, test and benchmark.
#   scripts/install-deps.sh               compiler, CMake and the libraries the headers use
#   scripts/install-deps.sh --with-torch  also PyTorch, for the tests and benchmarks that compare with it
# Idempotent: on a machine that already has everything it prints nothing and
# changes nothing. Uses sudo when not run as root.
set -euo pipefail

with_torch=0
for arg in "$@"; do
  case "$arg" in
    --with-torch) with_torch=1 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

# What the headers, tools, tests and benchmarks use (versions in docs/DEPENDENCIES.md).
packages=(cmake ninja-build g++ python3 libboost-dev xtensor-dev xtl-dev libxsimd-dev libdnnl-dev
          ocl-icd-opencl-dev doctest-dev nlohmann-json3-dev libbenchmark-dev zlib1g-dev
          clang libclang-rt-14-dev libopenmpi-dev openmpi-bin)
# PyTorch links the reference BLAS on Debian; OpenBLAS makes it a fair baseline;
# matplotlib draws bench/compare.py's chart.
torch_packages=(python3-torch python3-numpy libopenblas0-pthread python3-matplotlib)
torch_packages_norecommends=(python3-torchvision)

missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

need=($(missing "${packages[@]}"))
need_torch=()
need_torch_nr=()
if [ "$with_torch" = 1 ]; then
  need_torch=($(missing "${torch_packages[@]}"))
  need_torch_nr=($(missing "${torch_packages_norecommends[@]}"))
fi
if [ ${#need[@]} -eq 0 ] && [ ${#need_torch[@]} -eq 0 ] && [ ${#need_torch_nr[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() {
  if ! $sudo env DEBIAN_FRONTEND=noninteractive "$@" >>"$log" 2>&1; then
    cat "$log" >&2
    echo "install-deps.sh: failed: $*" >&2
    exit 1
  fi
}
echo "install-deps.sh: installing ${need[*]} ${need_torch[*]} ${need_torch_nr[*]}"
run apt-get update -qq
if [ ${#need[@]} -gt 0 ] || [ ${#need_torch[@]} -gt 0 ]; then
  run apt-get install -y -qq "${need[@]}" "${need_torch[@]}"
fi
if [ ${#need_torch_nr[@]} -gt 0 ]; then
  run apt-get install -y -qq --no-install-recommends "${need_torch_nr[@]}"
fi
