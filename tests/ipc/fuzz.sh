#!/bin/bash
# Runs every libFuzzer target of tests/fuzz for a short bounded time inside
# make check (≈20 s in total on the plain pass, less on the sanitizer pass: the
# fuzz binaries are ASan builds either way). Longer runs: make fuzz FUZZ_SECONDS=600.
set -u
cd "${GPUKMM_SRC:?run through tests/run.sh}" || exit 1
secs=10
[ "${SAN:-0}" = 1 ] && secs=4
out=$(BUILD=${BUILD:-build} tests/fuzz/run.sh "$secs" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
n=0
while read -r line; do
	case $line in
	"fuzz: "*"no crash"*) echo "ok - ${line#fuzz: }"; n=$((n + 1)) ;;
	"fuzz: "*FAILED*) echo "not ok - ${line#fuzz: }" ;;
	esac
done <<<"$out"
if [ $rc -ne 0 ] || [ $n -eq 0 ]; then
	echo "not ok - tests/fuzz/run.sh exit $rc"
	exit 1
fi
