#!/bin/bash
# One full probe of the largest fixture (8 GPUs x 63 VFs) vs lspci -k -vmm + modinfo
# on the same tree, side by side; writes $BUILD/bench/probe_big.json.
set -eu
BUILD=${BUILD:-build}
src=$(cd "$(dirname "$0")/../.." && pwd)
case $BUILD in /*) b=$BUILD ;; *) b=$src/$BUILD ;; esac
root=$("$src/tests/fixtures/probe-fixture.sh" big "$b/fixtures/probe")
mkdir -p "$b/bench"
export PATH="$PATH:/usr/sbin:/sbin" # modinfo
"$b/bench/probe_bench" "$root" 6.8.0-gk-test "$b/bin/gpukmmctl" "$b/bench/probe_big.json" "${PROBE_BENCH_RUNS:-15}"
