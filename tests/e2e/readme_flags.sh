#!/bin/bash
# README.md's configuration reference is the binaries' --help, verbatim: each
# binary documented there must match its current --help (tools/readme-flags.sh).
# A binary not documented yet is reported as a comment (it lands on another branch).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
BIN=${GPUKMM_BIN:-build/bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/readme.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
tools/readme-flags.sh "$BIN" --print >"$T/now"
sed -n '/^<!-- BEGIN flags/,/^<!-- END flags -->/p' README.md >"$T/readme"
[ -s "$T/readme" ] && echo "ok - README has the generated flags block" || echo "not ok - README has the generated flags block"
# split both into one file per binary
for f in now readme; do
	awk -v d="$T/$f." '/^### `/{n=$2; gsub(/`/,"",n)} n{print > (d n)}' "$T/$f"
done
n=0
for doc in "$T"/readme.*; do
	[ -e "$doc" ] || continue
	b=${doc##*/readme.}; n=$((n + 1))
	if [ ! -e "$T/now.$b" ]; then echo "# $b documented but not built here"; continue; fi
	if diff -u "$doc" "$T/now.$b" >"$T/diff"; then echo "ok - README documents $b exactly as its --help"; else
		echo "not ok - README documents $b exactly as its --help (run tools/readme-flags.sh)"
		head -20 "$T/diff" | sed 's/^/#   /'
	fi
done
[ $n -ge 5 ] && echo "ok - README documents $n binaries" || echo "not ok - README documents the binaries ($n)"
for now in "$T"/now.*; do
	b=${now##*/now.}
	[ -e "$T/readme.$b" ] || echo "# $b: not in README yet (run tools/readme-flags.sh)"
done
