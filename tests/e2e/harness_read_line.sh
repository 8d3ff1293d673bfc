#!/bin/bash
# The harness's read_line (tests/lib/nap.sh), which the node-profile follower reads its
# watch of the Nodes with: a line that its timeout cut comes whole with the next call.
# bash's own `read -t` returns the part it had and then the rest as a line of its own;
# the follower lost a node's change that way under load, and a rollout waited minutes for
# that node's next one.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/nap.sh
T=$(mktemp -d "${TMPDIR:-/tmp}/readline.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
FAILED=0
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; FAILED=1; }
tab=$'\t'

# the writer sends part of a line, then waits until told to send the rest
mkfifo "$T/go"
exec {fd}< <(printf 'gpu-1\t2'; read -r _ <"$T/go"; printf '.0\nnext\tx\n')
line=none rc=2 i=0
while [ $rc = 2 ] && [ -z "${READ_LINE_PART[$fd]:-}" ] && [ $i -lt 100 ]; do
	read_line "$fd" 0.1 line
	rc=$?
	i=$((i + 1))
done
if [ $rc = 2 ] && [ "${READ_LINE_PART[$fd]:-}" = "gpu-1${tab}2" ] && [ "$line" = none ]; then
	ok "a timeout in the middle of a line: 2, nothing in VAR, the part kept"
else
	notok "a timeout in the middle of a line: 2, nothing in VAR, the part kept (rc $rc, line '$line', part '${READ_LINE_PART[$fd]:-}')"
fi
echo go >"$T/go"
read_line "$fd" 10 line
rc=$?
[ $rc = 0 ] && [ "$line" = "gpu-1${tab}2.0" ] && ok "the rest: the whole line" ||
	notok "the rest: the whole line (rc $rc, '$line')"
read_line "$fd" 10 line
rc=$?
[ $rc = 0 ] && [ "$line" = "next${tab}x" ] && ok "the next line as it was" || notok "the next line as it was (rc $rc, '$line')"
read_line "$fd" 10 line
rc=$?
[ $rc = 1 ] && ok "the end of the input: 1" || notok "the end of the input: 1 (rc $rc)"
exec {fd}<&-

# a last line cut by the end of the input is dropped (a watch cut mid-event)
exec {fd}< <(printf 'one\ntw')
read_line "$fd" 10 line && [ "$line" = one ] && ! read_line "$fd" 10 line && [ -z "${READ_LINE_PART[$fd]:-}" ] &&
	ok "a line without its newline at the end: dropped, nothing kept" ||
	notok "a line without its newline at the end: dropped, nothing kept"
exec {fd}<&-
exit $FAILED
