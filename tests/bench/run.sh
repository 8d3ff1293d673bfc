#!/bin/bash
# Runs the benchmark scripts tests/bench/*.sh (not this one); each prints its
# ratios and writes $BUILD/bench/<name>.json. Usage: BUILD=build tests/bench/run.sh [PATTERN]
set -u
BUILD=${BUILD:-build}
export BUILD
rc=0
for sh in tests/bench/*.sh; do
	case $sh in */run.sh) continue ;; esac
	[ -n "${1:-}" ] && [[ $sh != *"$1"* ]] && continue
	echo "== $sh"
	bash "$sh" || { echo "bench $sh failed"; rc=1; }
done
exit $rc
