#!/bin/bash
# `make demo` runs (tools/demo.sh, non-interactive with DEMO_CHECK=1): every
# milestone of the demo is reached, and nothing is left running afterwards.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
BUILD=${BUILD:-build}
out=$(DEMO_CHECK=1 BUILD=$BUILD tools/demo.sh 2>&1 </dev/null)
rc=$?
echo "$out" | grep -E '^(ok|not ok|skip) - |^# ' | sed '/^# ----/,$d'
echo "$out" | grep -q '^not ok' && echo "$out" | sed -n '/^# ----/,$p' | head -60
[ $rc -eq 0 ] && echo "ok - tools/demo.sh exits 0" || echo "not ok - tools/demo.sh exits 0 (rc $rc)"
n=$(echo "$out" | grep -c '^ok - ')
# 44 milestones (the rolling upgrade among them)
[ "$n" -ge 44 ] && echo "ok - all $n milestones reached" || echo "not ok - milestones reached ($n < 44)"
left=$(pgrep -f "gpukmm-demo\.[A-Za-z0-9]*/" 2>/dev/null | head -3)
[ -z "$left" ] && echo "ok - the demo left no process behind" || echo "not ok - the demo left processes: $left"
