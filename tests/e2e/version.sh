#!/bin/bash
# --version: every binary prints "NAME VERSION" and exits 0; the version is the
# tree's `git describe` embedded by the Makefile, and a tree without git (a
# release tarball) still builds its version file and says "unknown".
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
BIN=${GPUKMM_BIN:-build/bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/version.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
FAILED=0
. tests/lib/proc.sh # ok, notok

want=unknown
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
	want=$(git describe --tags --always 2>/dev/null)
fi
n=0
for b in "$BIN"/*; do
	[ -x "$b" ] || continue
	name=$(basename "$b")
	out=$("$b" --version 2>&1)
	rc=$?
	n=$((n + 1))
	# the build may be of a tree with local changes (-dirty) or of an older commit
	# than HEAD (a build dir not rebuilt): the name and a version are what counts,
	# and when the build is of this very commit, that version
	if [ $rc = 0 ] && [[ $out =~ ^$name\ [^[:space:]]+$ ]]; then
		ok "$name --version: '$out'"
	else
		notok "$name --version (rc $rc): $out"
	fi
done
[ $n -ge 5 ] && ok "$n binaries checked" || notok "binaries found in $BIN ($n)"

# the Makefile's version file: from git here, "unknown" in a copy without .git
make -s BUILD="$T/b1" "$T/b1/gen/version.c" >/dev/null 2>&1
grep -qF "\"$want" "$T/b1/gen/version.c" && ok "version.c of this tree: $want" ||
	notok "version.c of this tree: want $want, got $(cat "$T/b1/gen/version.c" 2>&1)"
mkdir "$T/src"
tar --exclude=./.git --exclude='./build*' -cf - . | tar -xf - -C "$T/src"
make -s -C "$T/src" BUILD=b b/gen/version.c >/dev/null 2>&1
grep -qF '"unknown"' "$T/src/b/gen/version.c" && ok "a tree without git: version unknown" ||
	notok "a tree without git: version unknown (got $(cat "$T/src/b/gen/version.c" 2>&1))"
make -s -C "$T/src" BUILD=b VERSION=1.2.3 b/gen/version.c >/dev/null 2>&1
grep -qF '"1.2.3"' "$T/src/b/gen/version.c" && ok "VERSION= overrides it (packagers)" ||
	notok "VERSION= overrides it"
exit $FAILED
