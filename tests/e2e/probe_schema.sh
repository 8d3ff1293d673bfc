#!/bin/bash
# The node report's JSON against its JSON Schema (schema/node-report.v1alpha1.json,
# validated with python3-jsonschema, Draft 2020-12, formats checked): every scenario
# of tests/fixtures/mk-probe-fixture.sh (the list is read from the script, so a new
# scenario is covered), as `gpukmmctl probe --json` prints it and as the Node
# annotation holds it (--annotation: one line, at most 16 KiB, summarized when over),
# the lspci-dump variant, and this machine. The 8 GPUs x 63 VFs node: the annotation
# is the summarized form with the counts, every PF listed and its VFs counted.
# Without python3-jsonschema (tools/deps.sh installs it) this test fails.
set -u
: "${GPUKMM_SRC:=$PWD}" "${BUILD:=build}" "${GPUKMM_BIN:=$GPUKMM_SRC/$BUILD/bin}"
CTL="$GPUKMM_BIN/gpukmmctl"
SCHEMA="$GPUKMM_SRC/schema/node-report.v1alpha1.json"
case $BUILD in /*) base="$BUILD/fixtures/probe" ;; *) base="$GPUKMM_SRC/$BUILD/fixtures/probe" ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
FAILED=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; FAILED=1; }

if ! /usr/bin/python3 -c 'import jsonschema' 2>/dev/null; then
	nok "python3-jsonschema is installed (tools/deps.sh)"
	exit 1
fi
# validate FILE...: one line per file, "OK" or the first errors
validate() {
	/usr/bin/python3 - "$SCHEMA" "$@" <<'PY'
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
for f in sys.argv[2:]:
    try:
        doc = json.load(open(f))
    except ValueError as e:
        print(f, "not JSON:", e)
        continue
    errs = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
    print(f, "OK" if not errs else "; ".join("%s: %s" % ("/".join(map(str, e.path)), e.message[:160]) for e in errs[:3]))
PY
}

# (the case labels of the script: "name) # ..." or "a | b) # ...")
scenarios=$(sed -n 's/^\([a-z0-9| -]*\)) # .*/\1/p' "$GPUKMM_SRC/tests/fixtures/mk-probe-fixture.sh" | tr '|' '\n' | tr -d ' ')
[ "$(wc -w <<<"$scenarios")" -ge 12 ] && ok "scenarios read from mk-probe-fixture.sh: $(echo $scenarios)" ||
	nok "scenarios read from mk-probe-fixture.sh ($scenarios)"
files=()
for s in $scenarios; do
	root=$("$GPUKMM_SRC/tests/fixtures/probe-fixture.sh" "$s" "$base") || { nok "fixture $s builds"; continue; }
	"$CTL" probe --root "$root" --node-name "node-$s" --json >"$tmp/$s.json" 2>"$tmp/$s.err" || nok "$s: probe --json exits 0"
	"$CTL" probe --root "$root" --node-name "node-$s" --json --annotation >"$tmp/$s.ann.json" 2>"$tmp/$s.ann.err" ||
		nok "$s: probe --json --annotation exits 0"
	files+=("$tmp/$s.json" "$tmp/$s.ann.json")
	[ -f "$root/pci.dump" ] || continue
	"$CTL" probe --root "$root" --pci-dump "$root/pci.dump" --json >"$tmp/$s.dump.json" 2>/dev/null
	files+=("$tmp/$s.dump.json")
done
"$CTL" probe --json >"$tmp/this-machine.json" 2>/dev/null
files+=("$tmp/this-machine.json")
validate "${files[@]}" >"$tmp/verdicts"
while read -r f verdict; do
	n=${f#"$tmp/"}
	[ "$verdict" = OK ] && ok "schema: $n" || nok "schema: $n: $verdict"
done <"$tmp/verdicts"
[ "$(wc -l <"$tmp/verdicts")" = "${#files[@]}" ] || nok "a verdict per file (${#files[@]})"

# every annotation fits; only the big node's is summarized, and says why
for s in $scenarios; do
	b=$(wc -c <"$tmp/$s.ann.json")
	[ "$b" -le 16385 ] || nok "$s: annotation $b bytes, over 16 KiB"
	[ "$s" = big ] && continue
	cmp -s <(jq -S 'del(.probedAt)' "$tmp/$s.json") <(jq -S 'del(.probedAt)' "$tmp/$s.ann.json") ||
		nok "$s: the annotation is the full report (it fits)"
done
j() { jq -er "$1" "$tmp/big.ann.json" >/dev/null; }
j '.summarized.form == "vfs" and (.summarized.reason | test("504 VFs are counted per physical function"))' &&
	ok "8x63 VFs: the annotation says it is summarized and why" || nok "8x63 VFs: summarized with a reason"
j '.summary == {"physicalFunctions": 8, "virtualFunctions": 504}' && ok "8x63 VFs: the counts" || nok "8x63 VFs: the counts"
j '(.gpus | length) == 8 and all(.gpus[]; .virtualFunction == false and .vfSummary.count == 63 and .device == "e223")' &&
	ok "8x63 VFs: every PF listed, its 63 VFs counted" || nok "8x63 VFs: PFs listed with their VF counts"
j '.module.source == "oot" and .canUnload == "false" and (.unloadBlocker | length > 0)' &&
	ok "8x63 VFs: the module verdict stays" || nok "8x63 VFs: the module verdict"
j 'has("truncated") | not' && ok "8x63 VFs: never a bare truncated" || nok "8x63 VFs: no truncated flag"
grep -q 'summarized: the full report is [0-9]* bytes, over the budget of 16384' "$tmp/big.ann.err" &&
	ok "8x63 VFs: the CLI says why on stderr" || nok "8x63 VFs: the reason on stderr"
jq -e '(.gpus | length) == 512' "$tmp/big.json" >/dev/null && ok "8x63 VFs: --json alone lists all 512 functions" ||
	nok "8x63 VFs: --json lists all 512 functions"

# the schema refuses the old format and its mistakes (a schema that accepts anything proves nothing)
printf '%s\n' '{"node_name":"n1","gpus":[{"address":"0000:03:00.0","device_id":57891}],"module":{"source":"SOURCE_OOT"},"can_unload":"TRI_NO","probed_at_ms":"1700000000000"}' >"$tmp/old.json"
jq '.gpus[0].device = "57891"' "$tmp/oot-vfs.json" >"$tmp/decimal.json"
jq '.module.source = "SOURCE_OOT"' "$tmp/oot-vfs.json" >"$tmp/enum.json"
jq '.probedAt = 1700000000000' "$tmp/oot-vfs.json" >"$tmp/epoch.json"
jq '.gpus[0].vendor_id = "8086"' "$tmp/oot-vfs.json" >"$tmp/snake.json"
jq 'del(.apiVersion)' "$tmp/oot-vfs.json" >"$tmp/noversion.json"
validate "$tmp"/{old,decimal,enum,epoch,snake,noversion}.json >"$tmp/bad"
while read -r f verdict; do
	n=${f#"$tmp/"}
	[ "$verdict" != OK ] && ok "schema refuses $n" || nok "schema refuses $n"
done <"$tmp/bad"
exit $FAILED
