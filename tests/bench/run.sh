#!/bin/bash
# Runs every benchmark: each tests/bench/*.sh script (not this one) and each
# program in $BUILD/bench; each writes $BUILD/bench/<name>.json with at least
#   {"name":"<name>","summary":"<one line: the numbers and ratios that matter>", ...}
# (any JSON layout; read with jq). Prints every benchmark's own
# output, then a summary table built from the JSON files.
# Usage: BUILD=build tests/bench/run.sh [PATTERN]   (PATTERN: substring of the name)
set -u
BUILD=${BUILD:-build}
PATTERN=${1:-}
export BUILD GPUKMM_SRC="$PWD" GPUKMM_BIN="$PWD/$BUILD/bin" GPUKMM_TBIN="$PWD/$BUILD/tests/bin"
mkdir -p "$BUILD/bench"
rc=0
ran=()
for b in tests/bench/*.sh "$BUILD"/bench/*; do
	[ -e "$b" ] || continue
	case $b in */run.sh | *.json | *.d | *.log) continue ;; esac
	case $b in *.sh) ;; *) [ -x "$b" ] && [ -f "$b" ] || continue ;; esac
	name=$(basename "$b" .sh)
	[ -n "$PATTERN" ] && [[ $name != *"$PATTERN"* ]] && continue
	echo "== $name"
	rm -f "$BUILD/bench/$name.json"
	if [[ $b == *.sh ]]; then bash "$b"; else "$b"; fi
	r=$?
	if [ $r -ne 0 ]; then
		echo "bench: $name failed (exit $r)"
		rc=1
	fi
	ran+=("$name")
	echo
done
echo "== summary"
printf '%-20s %s\n' benchmark result
for name in "${ran[@]}"; do
	j="$BUILD/bench/$name.json"
	if [ -f "$j" ]; then
		# any JSON formatting (json.dumps writes "summary": "…", with a space)
		s=$(jq -r 'select(type == "object") | .summary // empty' "$j" 2>/dev/null | head -1)
		printf '%-20s %s\n' "$name" "${s:-(no summary in $j)}"
	else
		printf '%-20s %s\n' "$name" "(no $j written)"
	fi
done
[ ${#ran[@]} -gt 0 ] || { echo "bench: nothing ran"; exit 1; }
exit $rc
