#!/bin/bash
# README "Troubleshooting / By status reason" names every condition reason gpukmm
# writes (modmgr's ModuleLoaded conditions, statusd's Ready/ModuleLoaded/Degraded, the
# node problem reasons, the upgrader's Upgraded reasons and status.upgrade problem
# reasons), each with what it means and what to do (issue #17): a reason
# added to the code without a row fails here.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
FAILED=0
sect=$(sed -n '/^### By status reason/,/^### Other symptoms/p' README.md)
[ -n "$sect" ] && echo "ok - README has the section" || { echo "not ok - README has the section"; exit 1; }
reasons() {
	{
		grep -h 'cond(plan, ' services/modmgr/decide.c
		grep -h '^#define GK_POLICY_REASON_' include/gpukmm/policy.h # (reasons named by a macro)
		grep -h '\.reason = ' services/statusd/merge.c
		grep -h 'problem(s, d, "' services/statusd/nodes.c
		grep -h 'cond_reason = "\|problem(&\?c, i, [A-Z_a-z"]*, "\|return "[A-Z][A-Za-z]*";' services/upgrader/decide.c
		grep -ho 'problem(&c, i, "unavailable", [^,]*,' services/upgrader/decide.c
	} | grep -o '"[A-Z][A-Za-z]*"' | tr -d '"' | grep -vx 'True\|False\|Unknown' | sort -u
}
n=0
for r in $(reasons); do
	n=$((n + 1))
	if grep -q "\`$r\`" <<<"$sect"; then
		echo "ok - reason $r is in the troubleshooting table"
	else
		echo "not ok - reason $r is in the troubleshooting table"
		FAILED=1
	fi
done
[ "$n" -ge 25 ] && echo "ok - $n reasons found in the code" || { echo "not ok - $n reasons found in the code (the patterns broke?)"; FAILED=1; }
exit $FAILED
