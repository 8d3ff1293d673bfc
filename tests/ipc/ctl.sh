#!/bin/bash
# gpukmmctl ipc end to end against gpukmm-echo: call (short and full names,
# errors and their exit codes, deadlines, no server), pub/sub JSON lines.
set -u
BIN=${GPUKMM_BIN:?run through tests/run.sh}
CTL=$BIN/gpukmmctl
dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fails=0
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; fails=$((fails + 1)); }
check() { # name, expected rc, actual rc, [output to grep] [pattern]
	local name=$1 want=$2 got=$3
	if [ "$got" != "$want" ]; then nok "$name (exit $got, want $want)"; return; fi
	if [ $# -ge 5 ] && ! grep -q -- "$5" <<<"$4"; then nok "$name (output: $4)"; return; fi
	ok "$name"
}

addr="ipc://$dir/echo.sock"
"$BIN/gpukmm-echo" --listen "$addr" --log-level=warn --max-delay-ms=5000 &
pids+=($!)
for _ in $(seq 100); do
	"$CTL" ipc call "$addr" Echo.Echo '{}' --timeout-ms 200 >/dev/null 2>&1 && break
done

out=$("$CTL" ipc call "$addr" Echo.Echo '{"text":"hi","data":"AAEC"}' 2>&1); rc=$?
check "call Echo.Echo prints the reply" 0 $rc "$out" '"text":"hi","data":"AAEC"'
out=$("$CTL" ipc call "$addr" gpukmm.Echo.Echo '{"text":"full"}' 2>&1); rc=$?
check "full service name works" 0 $rc "$out" '"text":"full"'
out=$("$CTL" ipc call --timeout-ms 2000 "$addr" Echo.Echo 2>&1); rc=$?
check "options before arguments, JSON defaults to {}" 0 $rc "$out" '"server_pid"'
out=$("$CTL" ipc call "$addr" Echo.Add '{}' 2>&1); rc=$?
check "Add counts (1)" 0 $rc "$out" '"count":"1"'
out=$("$CTL" ipc call "$addr" Echo.Add '{}' 2>&1); rc=$?
check "Add counts (2): every CLI call is a new request" 0 $rc "$out" '"count":"2"'
out=$("$CTL" ipc call "$addr" Echo.Fail '{"fail_code":5,"text":"gone"}' 2>&1); rc=$?
check "server error: exit 1, code and message on stderr" 1 $rc "$out" 'NOT_FOUND: failed as asked: gone'
out=$("$CTL" ipc call "$addr" Echo.Fail '{"failCode":"FAILED_PRECONDITION"}' 2>&1); rc=$?
check "a string for an int32 field is bad JSON input" 2 $rc "$out" 'fail_code'
out=$("$CTL" ipc call "$addr" Echo.Slow '{"delay_ms":3000}' --timeout-ms 300 2>&1); rc=$?
check "deadline exceeded" 1 $rc "$out" 'DEADLINE_EXCEEDED'
out=$("$CTL" ipc call "$addr" Echo.Slow '{"delay_ms":9000}' 2>&1); rc=$?
check "handler-side validation (OUT_OF_RANGE)" 1 $rc "$out" 'OUT_OF_RANGE'
out=$("$CTL" ipc call "$addr" Echo.Echo '{"text":' 2>&1); rc=$?
check "broken JSON: exit 2" 2 $rc "$out" 'invalid JSON'
out=$("$CTL" ipc call "$addr" Echo.Echo '{"txt":"x"}' 2>&1); rc=$?
check "unknown field named: exit 2" 2 $rc "$out" "unknown field 'txt'"
out=$("$CTL" ipc call "$addr" Nope.Echo '{}' 2>&1); rc=$?
check "unknown service: exit 2" 2 $rc "$out" "unknown service 'Nope'"
out=$("$CTL" ipc call "$addr" Echo.Nope '{}' 2>&1); rc=$?
check "unknown method: exit 2" 2 $rc "$out" "no method 'Nope'"
out=$("$CTL" ipc call "$addr" 2>&1); rc=$?
check "missing arguments: usage, exit 2" 2 $rc "$out" 'usage:'
out=$("$CTL" ipc frob 2>&1); rc=$?
check "unknown action: exit 2" 2 $rc "$out" "unknown action 'frob'"
out=$("$CTL" ipc call "$addr" Echo.Echo '{}' --timeout-ms=abc 2>&1); rc=$?
check "bad option value: exit 2" 2 $rc "$out" 'bad value'
out=$("$CTL" ipc call "ipc://$dir/none.sock" Echo.Echo '{}' --timeout-ms 300 2>&1); rc=$?
check "no server: UNAVAILABLE, exit 1" 1 $rc "$out" 'UNAVAILABLE'
out=$("$CTL" ipc --help 2>&1); rc=$?
check "ipc --help" 0 $rc "$out" 'gpukmmctl ipc call'
out=$("$CTL" --help 2>&1); rc=$?
check "gpukmmctl lists ipc" 0 $rc "$out" 'ipc '

# pub/sub: the subscriber dials and retries; each pub listens, waits for it, publishes
bus="ipc://$dir/bus.sock"
"$CTL" ipc sub "$bus" node --count 2 --timeout-ms 10000 >"$dir/sub.out" 2>"$dir/sub.err" &
sub=$!
pids+=($sub)
"$CTL" ipc pub "$bus" node '{"type":"ADDED","node":{"metadata":{"name":"n1"}}}' --wait-ms 5000; rc1=$?
"$CTL" ipc pub "$bus" node '{"type":"DELETED","node":{"metadata":{"name":"n1"}}}' --wait-ms 5000; rc2=$?
wait $sub; rcs=$?
check "pub exits 0 when a subscriber got it" 0 $((rc1 + rc2))
check "sub gets --count events, exit 0" 0 $rcs
out=$(cat "$dir/sub.out")
check "sub prints topic, seq and the event" 0 0 "$out" '{"topic":"node","seq":1,"event":{"type":"ADDED","node":{"metadata":{"name":"n1"}}}}'
check "second publisher's event" 0 0 "$out" '"type":"DELETED"'
check "a new publisher is reported as a gap on stderr" 0 0 "$(cat "$dir/sub.err")" '# gap on node'
out=$("$CTL" ipc pub "ipc://$dir/lonely.sock" node '{}' --wait-ms 100 2>&1); rc=$?
check "pub with nobody listening: exit 1" 1 $rc "$out" 'no subscriber'
out=$("$CTL" ipc pub "$bus" node '{"nope":1}' 2>&1); rc=$?
check "pub with bad JSON: exit 2" 2 $rc "$out" "unknown field 'nope'"
out=$("$CTL" ipc sub "$bus" --type gpukmm.Nope 2>&1); rc=$?
check "sub with an unknown type: exit 2" 2 $rc "$out" 'unknown message type'
out=$("$CTL" ipc sub "ipc://$dir/quiet.sock" --count 1 --timeout-ms 200 2>&1); rc=$?
check "sub that gets nothing before the timeout: exit 1" 1 $rc "$out" 'got 0 of 1'

out=$("$BIN/gpukmm-echo" --help 2>&1); rc=$?
check "gpukmm-echo --help" 0 $rc "$out" '--max-delay-ms'
out=$("$BIN/gpukmm-echo" --bogus 2>&1); rc=$?
check "gpukmm-echo bad flag: exit 2" 2 $rc "$out" 'bad or incomplete option'
out=$("$BIN/gpukmm-echo" 2>&1); rc=$?
check "gpukmm-echo without an address: exit 2" 2 $rc "$out" 'no address'
[ $fails -eq 0 ]
