#!/bin/bash
# The YAML reader's duplicate-key check on big mappings: `gpukmmctl validate` of a
# ClusterPolicy whose metadata.labels has N keys (10,000, 40,000, 160,000), wall
# time and max RSS of each, and the time ratio per 4x more keys (about 4 when the
# check is linear, 16 when quadratic: a list walk per key took 3.9 s at 40,000).
# Budget: 40,000 keys in under 0.5 s. Writes $BUILD/bench/yamlkeys.json.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
BUILD=${BUILD:-build}
BIN=${GPUKMM_BIN:-$PWD/$BUILD/bin}
mkdir -p "$BUILD/bench"
T=$(mktemp -d "${TMPDIR:-/tmp}/gk-yamlkeys.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
BUDGET_MS=500
declare -A ms rss
for n in 10000 40000 160000; do
	f="$T/keys-$n.yaml"
	{
		printf 'apiVersion: intel.com/v1alpha1\nkind: ClusterPolicy\nmetadata:\n  name: gpu\n  labels:\n'
		seq -f '    k%.0f: v' 0 $((n - 1))
		printf '    k5: again\nspec: {resourceRegistration: dp}\n'
	} >"$f"
	t0=$(date +%s%N)
	out=$(/usr/bin/time -f 'RSS %M' "$BIN/gpukmmctl" validate "$f" 2>&1)
	ms[$n]=$((($(date +%s%N) - t0) / 1000000))
	rss[$n]=$(sed -n 's/^RSS \([0-9]*\)$/\1/p' <<<"$out")
	grep -q 'duplicate key "k5"' <<<"$out" || { echo "keys $n: the duplicate was not reported: $out"; exit 1; }
	echo "# $n keys: ${ms[$n]} ms, max RSS ${rss[$n]} KiB"
done
r1=$(awk -v a="${ms[40000]}" -v b="${ms[10000]}" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')
r2=$(awk -v a="${ms[160000]}" -v b="${ms[40000]}" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')
verdict=$([ "${ms[40000]}" -le $BUDGET_MS ] && echo within || echo OVER)
summary="40000 keys: ${ms[40000]} ms (budget $BUDGET_MS ms: $verdict), 160000: ${ms[160000]} ms; x4 keys -> x$r1, x$r2 time"
printf '{"name":"yamlkeys","summary":"%s","ms":{"10000":%s,"40000":%s,"160000":%s},"maxRssKiB":{"10000":%s,"40000":%s,"160000":%s},"budgetMs40000":%s}\n' \
	"$summary" "${ms[10000]}" "${ms[40000]}" "${ms[160000]}" "${rss[10000]:-0}" "${rss[40000]:-0}" "${rss[160000]:-0}" "$BUDGET_MS" |
	tee "$BUILD/bench/yamlkeys.json"
