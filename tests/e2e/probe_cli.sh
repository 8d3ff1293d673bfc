#!/bin/bash
# gpukmmctl probe on fixture roots and on this machine's real root: human and --json output.
set -u
: "${GPUKMM_SRC:=$PWD}" "${BUILD:=build}" "${GPUKMM_BIN:=$GPUKMM_SRC/$BUILD/bin}"
CTL="$GPUKMM_BIN/gpukmmctl"
case $BUILD in /*) base="$BUILD/fixtures/probe" ;; *) base="$GPUKMM_SRC/$BUILD/fixtures/probe" ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; }
check() { # name, then a command; the command's failure is the test's failure
	local name=$1
	shift
	if "$@"; then ok "$name"; else nok "$name"; fi
}
fx() { "$GPUKMM_SRC/tests/fixtures/probe-fixture.sh" "$1" "$base"; }
json_get() { # file, python expression on `r`
	/usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"
}

# --- fixture: OoT xe with 4 VFs ---
root=$(fx oot-vfs) || { nok "fixture oot-vfs"; exit 1; }
"$CTL" probe --root "$root" >"$tmp/h.txt" 2>"$tmp/h.err"
check "human output exits 0" test $? = 0
check "human: GPU line like lspci" grep -q '^0000:03:00.0 Display controller \[0380\]: Intel Corporation Battlemage G21 \[Arc B580\] \[8086:e20b\]' "$tmp/h.txt"
check "human: driver in use" grep -q 'Kernel driver in use: xe' "$tmp/h.txt"
check "human: SR-IOV count" grep -q 'SR-IOV: 4 of 24 VFs enabled' "$tmp/h.txt"
check "human: VFs listed" test "$(grep -c 'VF of 0000:03:00.0' "$tmp/h.txt")" = 4
check "human: module state" grep -q '^Module xe: loaded, out-of-tree (taint O)' "$tmp/h.txt"
check "human: modinfo of what modprobe loads" grep -q 'modprobe would load: updates/dkms/xe.ko (version 1.2.3-backport, signed by gpukmm test MOK, sha512)' "$tmp/h.txt"
check "human: unload verdict" grep -q '^Can unload xe now: no — 4 SR-IOV VFs active on 0000:03:00.0' "$tmp/h.txt"
check "human: nothing on stderr" test ! -s "$tmp/h.err"

"$CTL" probe --root "$root" --json --node-name n1 >"$tmp/j.json"
check "json exits 0" test $? = 0
check "json parses" /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/j.json"
check "json: node name" test "$(json_get "$tmp/j.json" 'r["nodeName"]')" = n1
check "json: 5 devices" test "$(json_get "$tmp/j.json" 'len(r["gpus"])')" = 5
check "json: module source" test "$(json_get "$tmp/j.json" 'r["module"]["source"]')" = oot
check "json: canUnload" test "$(json_get "$tmp/j.json" 'r["canUnload"]')" = false
check "json: VF physicalFunction" test "$(json_get "$tmp/j.json" 'r["gpus"][1]["physicalFunction"]')" = 0000:03:00.0
check "json: device id in hex as lspci prints it" test "$(json_get "$tmp/j.json" 'r["gpus"][0]["device"]')" = e20b

# --- fixture: corrupted inputs → problems, exit 0, no crash ---
root=$(fx corrupt) || { nok "fixture corrupt"; exit 1; }
"$CTL" probe --root "$root" >"$tmp/c.txt" 2>&1
check "corrupt: exits 0" test $? = 0
check "corrupt: problems section" grep -q '^Problems (inputs that could not be read):' "$tmp/c.txt"
check "corrupt: huge taint named" grep -q '/sys/module/xe/taint is unreadable: it is larger than' "$tmp/c.txt"
"$CTL" probe --root "$root" --json >"$tmp/c.json" 2>&1
check "corrupt: json problems" test "$(json_get "$tmp/c.json" 'len(r["problems"]) >= 9')" = True

# --- fixture: Secure Boot with an unsigned OoT module ---
root=$(fx sb-unsigned) || { nok "fixture sb-unsigned"; exit 1; }
"$CTL" probe --root "$root" >"$tmp/s.txt"
check "secure boot: on" grep -q '^Secure Boot: on, lockdown: integrity' "$tmp/s.txt"
check "secure boot: warning" grep -q 'Secure Boot is on and updates/dkms/xe.ko (the xe that modprobe would load) is not signed' "$tmp/s.txt"

# --- lspci dump ---
root=$(fx bmg2) || { nok "fixture bmg2"; exit 1; }
"$CTL" probe --root "$root" --pci-dump "$root/pci.dump" >"$tmp/d.txt"
check "dump: two GPUs" grep -q '^Intel GPUs: 2 physical, 0 virtual functions' "$tmp/d.txt"
check "dump: driver unknown" grep -q 'Kernel driver in use: unknown (PCI dump)' "$tmp/d.txt"

# --- this machine ---
"$CTL" probe >"$tmp/m.txt" 2>"$tmp/m.err"
check "real root: exits 0" test $? = 0
check "real root: kernel line" grep -q "^Kernel: $(uname -r), loadable modules: " "$tmp/m.txt"
if [ -e /proc/modules ]; then
	check "real root: modules supported" grep -q 'loadable modules: supported' "$tmp/m.txt"
else
	check "real root: no module support reported" grep -q 'loadable modules: not supported (no /proc/modules)' "$tmp/m.txt"
fi
"$CTL" probe --json >"$tmp/m.json"
check "real root: json exits 0" test $? = 0
check "real root: json module name" test "$(json_get "$tmp/m.json" 'r["moduleName"]')" = xe

# --- usage errors ---
"$CTL" probe --root "$tmp/nope" >/dev/null 2>"$tmp/u.err"
check "missing root: exit 2" test $? = 2
check "missing root: message" grep -q 'is not a directory' "$tmp/u.err"
"$CTL" probe --module '../x' >/dev/null 2>&1
check "bad module name: exit 2" test $? = 2
"$CTL" probe --bogus >/dev/null 2>&1
check "unknown flag: exit 2" test $? = 2
"$CTL" probe --help | grep -q -- '--json'
check "help mentions --json" test $? = 0

# --- gpukmm-probe: the same command without the cluster client's libraries ---
PROBE="$GPUKMM_BIN/gpukmm-probe"
for s in oot-vfs corrupt none; do
	root=$(fx $s) || { nok "fixture $s"; continue; }
	"$CTL" probe --root "$root" >"$tmp/ctl-$s.txt" 2>&1
	"$PROBE" --root "$root" >"$tmp/probe-$s.txt" 2>&1
	check "gpukmm-probe: same report as gpukmmctl probe ($s)" cmp -s "$tmp/ctl-$s.txt" "$tmp/probe-$s.txt"
	"$CTL" probe --root "$root" --json | grep -v '"probedAt"' >"$tmp/ctl-$s.json"
	"$PROBE" --root "$root" --json | grep -v '"probedAt"' >"$tmp/probe-$s.json"
	check "gpukmm-probe: same JSON as gpukmmctl probe ($s)" cmp -s "$tmp/ctl-$s.json" "$tmp/probe-$s.json"
done
no_client_libs() { ! readelf -d "$1" | grep NEEDED | grep -qE 'libcurl|libssl|libnng|libre2|libstdc'; }
check "gpukmm-probe: links no cluster client library" no_client_libs "$PROBE"
"$PROBE" --bogus >/dev/null 2>"$tmp/pu.err"
check "gpukmm-probe: unknown flag: exit 2" test $? = 2
check "gpukmm-probe: usage names gpukmm-probe" grep -q '^usage: gpukmm-probe ' "$tmp/pu.err"

# --- product names: what lspci prints (pci.ids), read by our line reader ---
if command -v lspci >/dev/null && lspci -F "$GPUKMM_SRC/tests/fixtures/probe/flex-64.lspci" -vmm >"$tmp/l.txt" 2>/dev/null; then
	want=$(awk -F'\t' '/^Class:/ { disp = ($2 ~ /Display|VGA/) } disp && /^Device:/ { print $2; exit }' "$tmp/l.txt")
	"$PROBE" --root "$(fx bmg2)" --pci-dump "$GPUKMM_SRC/tests/fixtures/probe/flex-64.lspci" --json >"$tmp/n.json"
	check "product name as lspci names it ($want)" test "$(json_get "$tmp/n.json" 'r["gpus"][0]["productName"]')" = "$want"
else
	ok "# SKIP lspci cannot read the dump here"
fi
