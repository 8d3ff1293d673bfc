#!/bin/bash
# make check: build and run every test (tests/run.sh), then build and run them all again
# under ASan+UBSan in $BUILD-san. Exits non-zero at the first pass that fails.
#
# The sanitizer build (about 2 minutes of both cores) runs beside the plain pass's tests,
# at nice 19: those tests wait on conditions much of the time and leave about a quarter
# of the CPU idle, which the build takes without slowing them much (a niced process gets
# ~1.5% of a core a busy test wants). The sanitizer tests start once both are done.
# Usage: BUILD=build JOBS=2 tests/check.sh [PATTERN]   (MAKE: the make to run; PATTERN
# as tests/run.sh's: only the tests whose path contains it, in both passes)
set -u
BUILD=${BUILD:-build} JOBS=${JOBS:-2} MAKE=${MAKE:-make}
SANB=$BUILD-san
"$MAKE" -j"$JOBS" BUILD="$BUILD" SAN=0 tests || exit

mkdir -p "$SANB" || exit
# Its own session (setsid): stopped as one group when this script stops early. A session
# is also a scheduler autogroup where the kernel has them (sched_autogroup_enabled): nice
# counts only inside one, and a new one would get as much CPU as the tests' own; so the
# build, once in its session, sets its autogroup's nice to 19 too (/proc/self/autogroup).
setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' make-san \
	"$MAKE" -j"$JOBS" BUILD="$SANB" SAN=1 OPT=-O1 tests >"$SANB/build.log" 2>&1 &
san_build=$!
stop_san_build() { [ -n "$san_build" ] && kill -TERM -- "-$san_build" 2>/dev/null; }
trap 'stop_san_build; exit 130' INT
trap 'stop_san_build; exit 143' TERM
trap 'stop_san_build' EXIT

BUILD=$BUILD SAN=0 tests/run.sh "${1:-}"
rc=$?
[ $rc = 0 ] || exit $rc

t0=$SECONDS
wait "$san_build"
brc=$?
san_build=
echo "sanitizer build ($SANB, beside the tests): exit $brc, waited $((SECONDS - t0)) s for it after them"
if [ $brc != 0 ]; then
	echo "sanitizer build failed (exit $brc); the end of $SANB/build.log:"
	tail -n 40 "$SANB/build.log"
	exit $brc
fi
BUILD=$SANB SAN=1 tests/run.sh "${1:-}"
