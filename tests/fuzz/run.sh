#!/bin/bash
# Builds the libFuzzer targets tests/fuzz/fuzz_*.c with clang (ASan + UBSan +
# libFuzzer) into $BUILD/fuzz and runs each for SECONDS (default 30), starting
# from the seeds in tests/fuzz/seeds/<target>/ and the corpus grown so far. Prints the
# executions per target and exits non-zero on a crash, or when clang / libFuzzer is
# missing (Debian: clang libclang-rt-14-dev, see tools/deps.sh). SECONDS 0: no fuzzing,
# each input of the corpus runs once (a replay).
# Usage: BUILD=build tests/fuzz/run.sh [SECONDS]
set -u
BUILD=${BUILD:-build}
SECS=${1:-30}
CLANG=${CLANG:-clang}
out="$BUILD/fuzz"
mkdir -p "$out"
if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "fuzz: $CLANG not found: install clang and libclang-rt-14-dev (tools/deps.sh)" >&2
	exit 3
fi
probe="$out/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){return 0;}' >"$probe"
if ! "$CLANG" -fsanitize=fuzzer -o "$out/probe" "$probe" 2>"$out/probe.log"; then
	echo "fuzz: $CLANG cannot link libFuzzer (install libclang-rt-14-dev):" >&2
	head -3 "$out/probe.log" >&2
	exit 3
fi
if [ ! -f "$BUILD/gen/pb_registry.c" ]; then
	echo "fuzz: $BUILD/gen missing: run make first (make fuzz does)" >&2
	exit 2
fi
CFLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -Iinclude -Ilib -I$BUILD/gen $(pkg-config --cflags libprotobuf-c libcjson)"
LIBS="$(pkg-config --libs libprotobuf-c libcjson) -lm"
COMMON="lib/ipc/frame.c lib/ipc/unpack.c lib/ipc/json.c lib/ipc/registry.c $BUILD/gen/pb_registry.c lib/base/err.c $BUILD/gen/*.pb-c.c"
rc=0
for src in tests/fuzz/fuzz_*.c; do
	t=$(basename "$src" .c)
	name=${t#fuzz_}
	bin="$out/$t"
	# A target may name more sources and pkg-config packages in its own lines
	#   // fuzz-sources: lib/x/*.c lib/x/*.cc      // fuzz-pkgs: yaml-0.1   // fuzz-libs: -lre2
	# (C++ sources are compiled with clang++, without the UBSan checks that need
	# the C++ UBSan runtime, and linked with -lstdc++).
	extra=$(sed -n 's|^// fuzz-sources: *||p' "$src")
	pkgs=$(sed -n 's|^// fuzz-pkgs: *||p' "$src")
	xlibs=$(sed -n 's|^// fuzz-libs: *||p' "$src")
	srcs=""
	# shellcheck disable=SC2086
	[ -n "$extra" ] && srcs=$(ls -d $extra)
	# rebuild when any input is newer than the binary
	# shellcheck disable=SC2086
	if [ ! -x "$bin" ] || [ -n "$(find "$src" $COMMON $srcs lib/ipc/*.h include -newer "$bin" 2>/dev/null | head -1)" ]; then
		objs="" cxx="" ok=1
		: >"$out/$t.build.log"
		for cc in $srcs; do
			case $cc in
			*.cc)
				o="$out/$t-$(basename "$cc").o"
				# shellcheck disable=SC2086
				"${CLANG}++" -std=c++17 $CFLAGS -fno-sanitize=function,vptr -c -o "$o" "$cc" \
					2>>"$out/$t.build.log" || ok=0
				objs="$objs $o" cxx=-lstdc++ ;;
			*) objs="$objs $cc" ;;
			esac
		done
		# shellcheck disable=SC2086
		if [ $ok = 0 ] || ! "$CLANG" $CFLAGS -o "$bin" "$src" $COMMON $objs $LIBS \
			$([ -n "$pkgs" ] && pkg-config --libs $pkgs) $xlibs $cxx 2>>"$out/$t.build.log"; then
			echo "fuzz: building $t failed:" >&2
			head -20 "$out/$t.build.log" >&2
			rc=1
			continue
		fi
	fi
	corpus="$out/corpus-$name"
	mkdir -p "$corpus"
	[ -d "tests/fuzz/seeds/$name" ] && cp -n tests/fuzz/seeds/"$name"/* "$corpus"/ 2>/dev/null
	log="$out/$t.log"
	budget=-max_total_time=$SECS
	[ "$SECS" = 0 ] && budget=-runs=0
	ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
		"$bin" "$budget" -max_len=8192 -timeout=10 -rss_limit_mb=1024 \
		-print_final_stats=1 -artifact_prefix="$out/$t-" "$corpus" >"$log" 2>&1
	r=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	if [ $r -ne 0 ]; then
		echo "fuzz: $t FAILED after ${execs:-?} executions (exit $r) — log: $log"
		grep -E 'ERROR|SUMMARY|artifact' "$log" | head -10
		rc=1
	else
		what="${execs:-0} executions in ${SECS}s"
		[ "$SECS" = 0 ] && what="corpus replayed (${execs:-0} executions)"
		echo "fuzz: $t: $what, no crash (corpus $(ls "$corpus" | wc -l) inputs)"
	fi
done
exit $rc
