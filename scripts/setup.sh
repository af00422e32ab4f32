#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (as root) and for CI:
#   scripts/setup.sh demo   install what is missing, build, run the main job
#   scripts/setup.sh test   install what is missing, build, run the whole test suite
#   scripts/setup.sh stacks SWEEP...   also install the BLAS libraries those sweeps' stacks
#                                      name (the system's BLAS alternative is left as it is)
# Re-running is quick: packages already installed are not touched and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  demo|test|stacks) ;;
  *) echo "usage: scripts/setup.sh demo|test|stacks SWEEP..." >&2; exit 2 ;;
esac
shift || true

packages=(
  g++ cmake make git
  # trainbench runs on OpenBLAS's OpenMP build, which shares LibTorch's OpenMP runtime; it
  # selects it per process (docs/stacks.md), whatever the system's alternative says. The
  # pthread build stays for the software-stack axis (blas=openblas-pthread).
  libtorch-dev libopenblas0-openmp libopenblas0-pthread
  nlohmann-json3-dev libcli11-dev libfmt-dev libboost-dev libsqlite3-dev libgtest-dev
  libtomlplusplus-dev libeigen3-dev sqlite3
  libcsv-dev  # the published throughputs' CSV (simulate --validate-published)
  zlib1g-dev dataset-fashion-mnist  # the emulation phase's real data (trainbench emulate)
  dict-gcide  # the language task's English text (emulate --dataset gcide; GPL-2+)
  libgloo-dev  # Gloo's headers, which LibTorch's c10d ProcessGroupGloo.hpp includes
  libblas3  # the reference BLAS: only so the test that detects a slow BLAS can load it
)
# The browser that checks the HTML report renders (tests/report_browser_test.cc).
[ "$mode" = test ] && packages+=(chromium)
# Network namespaces, veth pairs and traffic shaping for tests/distributed_test.cc.
[ "$mode" = test ] && packages+=(iproute2)
# The reference definitions (torchvision, torch.nn) the model tests compare parameter names,
# shapes and counts with, and that make the TorchScript test modules. Tests only: trainbench
# itself never runs Python, and the tests carry the reference numbers for when it is absent.
[ "$mode" = test ] && packages+=(python3-torchvision)
# The check that the tree stays formatted (.clang-format; the ClangFormat test).
[ "$mode" = test ] && packages+=(clang-format)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=build
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j"$(nproc)"

if [ "$mode" = stacks ]; then
  [ $# -gt 0 ] || { echo "usage: scripts/setup.sh stacks SWEEP..." >&2; exit 2; }
  wanted=()
  for sweep in "$@"; do
    while read -r p; do wanted+=("$p"); done < <("$build"/trainbench sweep "$sweep" --packages)
  done
  need=()
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    # Installing a BLAS may switch the system-wide alternative by priority; trainbench
    # chooses per process, so the machine keeps the one it had.
    arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
    alts=("libblas.so.3-$arch" "liblapack.so.3-$arch" "libopenblas.so.0-$arch")
    declare -A before
    for a in "${alts[@]}"; do
      before[$a]=$(update-alternatives --query "$a" 2>/dev/null | sed -n 's/^Value: //p')
    done
    echo "setup: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    for a in "${alts[@]}"; do
      now=$(update-alternatives --query "$a" 2>/dev/null | sed -n 's/^Value: //p')
      if [ -n "${before[$a]}" ] && [ "${before[$a]}" != "$now" ]; then
        update-alternatives --set "$a" "${before[$a]}" >/dev/null
      fi
    done
  fi
  echo "setup: the stacks of $* can run"
  exit 0
fi

if [ "$mode" = test ]; then
  # One job per core: tests/CMakeLists.txt runs the ones that time the machine alone.
  exec ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
fi

# The main job: characterize this machine (cached after the first time), run the demo
# sweep into a results store (resumable: a second run skips what is done), profile two of
# its configs and measure one's memory, run two reference models, check the simulator against
# the measurements, export it all, and write the report.
mkdir -p out
"$build"/trainbench platform
"$build"/trainbench sweep demo --store out/demo.db
"$build"/trainbench profile fc:layers=4,nodes=512,batch=256 --store out/demo.db --top 5
"$build"/trainbench profile cnn:block=residual,filters=16,image=32,output=10,batch=32 --store out/demo.db --top 5
"$build"/trainbench memory cnn:block=residual,filters=16,image=32,output=10 --batch 16,32 --store out/demo.db
# Two of the reference models, drawn as stars among the generated ones (the whole suite,
# `trainbench suite --batch-sweep`, takes hours on a small CPU).
"$build"/trainbench suite --models squeezenet1_1,mobilenet_v2 --store out/demo.db --budget 10
# The accelerator model's prediction of this machine's step times against the measured ones.
"$build"/trainbench simulate --validate out/demo.db
"$build"/trainbench export out/demo.db --format csv -o out/demo.csv
"$build"/trainbench report out/demo.db -o out/report.html --title "trainbench demo"
echo "results: $(pwd)/out/demo.db (SQLite), $(pwd)/out/demo.csv"
echo "report:  $(pwd)/out/report.html"
