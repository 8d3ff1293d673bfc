#!/bin/bash
# Runs every libFuzzer target of tests/fuzz for a short bounded time inside
# make check (10 s each on the plain pass). The fuzz binaries are ASan+UBSan builds
# in either pass, so the sanitizer pass does not build them again nor fuzz twice:
# it replays the corpus the plain pass grew, every input once, with the plain
# pass's binaries (its own build when there is no plain one). Longer runs: make fuzz
# FUZZ_SECONDS=600.
set -u
cd "${GPUKMM_SRC:?run through tests/run.sh}" || exit 1
secs=10 fb=${BUILD:-build}
if [ "${SAN:-0}" = 1 ]; then
	secs=0
	[ -f "${fb%-san}/gen/pb_registry.c" ] && fb=${fb%-san}
fi
out=$(BUILD=$fb tests/fuzz/run.sh "$secs" 2>&1)
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
