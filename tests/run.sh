#!/bin/bash
# Runs every test of one build dir and prints one closing line "N passed, N failed".
#  - Criterion binaries in $BUILD/tests/unit and $BUILD/tests/ipc: counted from their
#    "[====] Synthesis:" line; a binary that runs no test counts as a failure.
#  - Script tests tests/*/*.sh (not run.sh): each prints "ok - name" / "not ok - name"
#    lines; a script that exits non-zero without a "not ok" line counts one failure.
#  - Binaries and scripts share one pool of TEST_SCRIPT_JOBS slots (default 2: the
#    scripts mostly wait on conditions, each in its own temp dir with its own API server
#    and ports; a binary runs its tests TEST_JOBS at a time), the slowest of the last
#    run first (their durations in $BUILD/test-logs/durations; a fresh clone orders by
#    tests/durations, a copy of that file from a full run, refreshed now and then by
#    hand: only an order, a stale or missing line costs some packing, never a test);
#    results print as they finish. TEST_SCRIPT_JOBS=1: one after the other.
# Usage: BUILD=build tests/run.sh [PATTERN]   (PATTERN: substring of the test path)
set -u
BUILD=${BUILD:-build}
PATTERN=${1:-}
export BUILD
export GPUKMM_BIN="$PWD/$BUILD/bin" GPUKMM_TBIN="$PWD/$BUILD/tests/bin" GPUKMM_SRC="$PWD"
# a kubesim of the caller's shell (tests/lib/kubesim.sh sourced by hand) is no test's:
# a script reaching kraw before its own kubesim_start must fail, not talk to a dead port
unset KUBESIM_URL KUBESIM_DIR KUBESIM_PID KUBESIM_PORT KUBESIM_CA KUBESIM_ADMIN_TOKEN
# jq -e that fails when it produced nothing (tests/bin/jq): a check fed by a failed request fails
export PATH="$PWD/tests/bin:$PATH"
case "${SAN:-0}" in 1)
	export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
	export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
	export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
	;;
esac
JOBS=${TEST_JOBS:-2}
passed=0 failed=0 skipped=0
failures=()
# No retry: a test that fails once is a failing test (a race to find and fix,
# in the code or the test), never a pass on a second try.
logdir="$BUILD/test-logs"
mkdir -p "$logdir"

# Tests of a --verbose Criterion log that printed "[RUN ]" and no result line.
crit_unfinished() {
	grep -a -E '^\[(RUN |PASS|FAIL|SKIP)\] ' "$1" | sed -E 's/^\[(RUN |PASS|FAIL|SKIP)\] ([^:]+::[^:]+).*/\1 \2/' |
		awk '$1 == "RUN" { run[$2] = 1; next } { delete run[$2] } END { for (t in run) print "  started, never ended: " t }'
}

# A test (a Criterion binary or a script) in the background: its log, then its exit
# code and seconds in LOG.rc.
start_test() {
	local path=$1 log
	log="$logdir/$(log_name "$path").log"
	rm -f "$log.rc"
	(
		t0=$SECONDS
		case $path in
		*.sh) timeout -k 10 "${TEST_TIMEOUT:-900}" bash "$path" >"$log" 2>&1 ;;
		*) timeout -k 10 "${TEST_TIMEOUT:-900}" "$path" --verbose --jobs "$JOBS" --timeout "${CRIT_TIMEOUT:-300}" >"$log" 2>&1 ;;
		esac
		echo "$? $((SECONDS - t0))" >"$log.rc"
	) &
	RUNNING[$!]=$path
}
log_name() { local n=${1#$BUILD/tests/}; echo "${n//\//_}"; }

# Count a finished test and print its line.
finish_test() {
	local path=$1 log rc secs
	log="$logdir/$(log_name "$path").log"
	read -r rc secs <"$log.rc" 2>/dev/null || { rc=255 secs=0; }
	rm -f "$log.rc"
	echo "$secs ${path#$BUILD/}" >>"$logdir/durations.new" # (a binary: the same key in both passes)
	case $path in
	*.sh) finish_script "$path" "$log" "$rc" "$secs" ;;
	*) finish_criterion "$path" "$log" "$rc" "$secs" ;;
	esac
}

finish_criterion() {
	local bin=$1 log=$2 rc=$3 secs=$4 name synth t p f c
	name=${bin#$BUILD/tests/}
	synth=$(grep -a 'Synthesis:' "$log" | tail -1)
	t=$(sed -n 's/.*Tested: \([0-9]*\).*/\1/p' <<<"$synth"); t=${t:-0}
	p=$(sed -n 's/.*Passing: \([0-9]*\).*/\1/p' <<<"$synth"); p=${p:-0}
	f=$(sed -n 's/.*Failing: \([0-9]*\).*/\1/p' <<<"$synth"); f=${f:-0}
	c=$(sed -n 's/.*Crashing: \([0-9]*\).*/\1/p' <<<"$synth"); c=${c:-0}
	if [ "$t" = 0 ] || [ $rc -ne 0 ] && [ $((f + c)) = 0 ]; then
		f=$((f + 1))
	fi
	passed=$((passed + p)); failed=$((failed + f + c))
	if [ $((f + c)) -gt 0 ]; then
		failures+=("$name")
		echo "FAIL $name (${secs}s, tested $t, passing $p, failing $f, crashing $c, rc $rc) — log: $log"
		# (a warning or a runner error fails the run with every test passing: shown too)
		grep -a -E '\[----\]|\[FAIL\]|\[WARN\]|\[ERR |ERROR|Sanitizer|runtime error' "$log" | grep -a -v '^\[----\] Criterion v' | head -40
		# the runner itself died: which tests had started and never ended
		[ -z "$synth" ] && crit_unfinished "$log"
		# and the last words beside Criterion's (a test's stderr: its children's
		# warnings, a sanitizer's report), which CI's record would not show otherwise
		echo "  last lines of the log beside Criterion's:"
		grep -a -v '^\[' "$log" | tail -15 | sed 's/^/  | /'
	else
		echo "PASS $name ($p tests, ${secs}s)"
	fi
}

finish_script() {
	local sh=$1 log=$2 rc=$3 secs=$4 ok nok sk
	ok=$(grep -a -c '^ok ' "$log"); nok=$(grep -a -c '^not ok ' "$log")
	sk=$(grep -a -c '^skip ' "$log")
	if [ $rc -ne 0 ] && [ "$nok" = 0 ]; then nok=1; fi
	if [ "$ok" = 0 ] && [ "$nok" = 0 ]; then nok=1; fi
	passed=$((passed + ok)); failed=$((failed + nok)); skipped=$((skipped + sk))
	if [ "$nok" -gt 0 ]; then
		failures+=("$sh")
		echo "FAIL $sh (${secs}s, ok $ok, not ok $nok, rc $rc) — log: $log"
		grep -a -E '^not ok|^#' "$log" | head -40; tail -20 "$log"
	else
		echo "PASS $sh ($ok checks, ${secs}s)"
	fi
}

tests=()
for bin in $(ls "$BUILD"/tests/unit/* "$BUILD"/tests/ipc/* 2>/dev/null | grep -v '\.d$' | sort); do
	[ -x "$bin" ] || continue
	[ -n "$PATTERN" ] && [[ $bin != *"$PATTERN"* ]] && continue
	tests+=("$bin")
done
for sh in $(ls tests/ipc/*.sh tests/e2e/*.sh 2>/dev/null | sort); do
	case $sh in *chaos.sh) [ -z "${CHAOS_IN_CHECK:-1}" ] && continue ;; esac
	[ -n "$PATTERN" ] && [[ $sh != *"$PATTERN"* ]] && continue
	tests+=("$sh")
done
# the slowest first (the last run's durations, or the plain pass's for the sanitizer one,
# or, in a fresh clone, tests/durations: those of a full run, kept in git so that CI's
# first pass packs its slots too; a test not in them, e.g. a new one, first of all)
durs=$logdir/durations
[ -s "$durs" ] || durs=${BUILD%-san}/test-logs/durations
[ -s "$durs" ] || durs=tests/durations
if [ -s "$durs" ] && [ ${#tests[@]} -gt 0 ]; then
	mapfile -t tests < <(printf '%s\n' "${tests[@]}" |
		awk -v b="$BUILD/" 'NR == FNR { d[$2] = $1; next }
			{ k = $0; if (index(k, b) == 1) k = substr(k, length(b) + 1); print (k in d ? d[k] : 1e9), $0 }' "$durs" - |
		sort -k1,1nr -k2,2 | cut -d' ' -f2-)
fi
rm -f "$logdir/durations.new"
declare -A RUNNING=()
SJOBS=${TEST_SCRIPT_JOBS:-2}
for t in "${tests[@]}"; do
	while [ ${#RUNNING[@]} -ge "$SJOBS" ]; do
		wait -n -p done_pid
		finish_test "${RUNNING[$done_pid]}"
		unset "RUNNING[$done_pid]"
	done
	start_test "$t"
done
while [ ${#RUNNING[@]} -gt 0 ]; do
	wait -n -p done_pid
	finish_test "${RUNNING[$done_pid]}"
	unset "RUNNING[$done_pid]"
done
[ -s "$logdir/durations.new" ] && [ -z "$PATTERN" ] && mv "$logdir/durations.new" "$logdir/durations"
rm -f "$logdir/durations.new"

echo
if [ ${#failures[@]} -gt 0 ]; then
	echo "failed: ${failures[*]}"
fi
if [ $((passed + failed)) -eq 0 ]; then
	echo "no test ran"
	echo "0 passed, 1 failed"
	exit 1
fi
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
