#!/bin/bash
# Runs the benchmark scripts tests/bench/*.sh (not this file) whose path contains
# PATTERN. Each writes $BUILD/bench/<name>.json and prints a summary with the
# ratio it measured side by side in the same run. Usage: BUILD=build tests/bench/run.sh [PATTERN]
set -u
BUILD=${BUILD:-build}
PATTERN=${1:-}
export BUILD GPUKMM_BIN="$PWD/$BUILD/bin" GPUKMM_TBIN="$PWD/$BUILD/tests/bin" GPUKMM_SRC="$PWD"
export GPUKMM_BENCH="$PWD/$BUILD/bench"
mkdir -p "$GPUKMM_BENCH"
rc=0
for sh in tests/bench/*.sh; do
	[ "$(basename "$sh")" = run.sh ] && continue
	[ -n "$PATTERN" ] && [[ $sh != *"$PATTERN"* ]] && continue
	echo "== $sh"
	bash "$sh" || { echo "FAILED: $sh"; rc=1; }
done
exit $rc
