#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (as root) and for CI:
#   scripts/setup.sh demo   install what is missing, build, run the main job
#   scripts/setup.sh test   install what is missing, build, run the whole test suite
# Re-running is quick: packages already installed are not touched and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  demo|test) ;;
  *) echo "usage: scripts/setup.sh demo|test" >&2; exit 2 ;;
esac

packages=(
  g++ cmake make git
  libtorch-dev libopenblas0-pthread
  nlohmann-json3-dev libcli11-dev libfmt-dev libboost-dev libsqlite3-dev libgtest-dev
  libtomlplusplus-dev sqlite3
  libblas3  # the reference BLAS: only so the test that detects a slow BLAS can load it
)
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

if [ "$mode" = test ]; then
  exec ctest --test-dir "$build" --output-on-failure -j1
fi

# The main job: one small config of each family, each measured to +-1%.
mkdir -p out
"$build"/trainbench run \
  fc:layers=4,nodes=512,input=2000,output=200,batch=256 \
  cnn:block=residual,blocks=1,filters=16,image=64,output=100,batch=16 \
  rnn:cell=lstm,layers=2,embed=256,length=20,vocab=1024,batch=32 \
  --budget 20 -o out/demo.json || true
echo "results: $(pwd)/out/demo.json"
