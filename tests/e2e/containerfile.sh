#!/bin/bash
# Containerfile: every shared library the built binaries link (readelf -d NEEDED)
# is provided (dpkg -S) by a package the runtime stage installs, or by libc6 /
# libgcc-s1 of the base image; the runtime stage runs as non-root with the
# supervisor as entrypoint. (No container engine here: the image is not built.)
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
BIN=${GPUKMM_BIN:-build/bin}
CF=Containerfile

# packages of the last stage's apt-get install
pkgs=$(awk '/^FROM/{n++} {print n"\t"$0}' "$CF" | awk -F'\t' -v last="$(grep -c '^FROM' "$CF")" \
	'$1==last{print $2}' | sed -n '/apt-get install/,/rm -rf/p' | tr ' \\' '\n\n' |
	grep -E '^lib[a-z0-9.+-]+$|^ca-certificates$' | sort -u)
base="libc6 libgcc-s1"
if [ -n "$pkgs" ]; then echo "ok - runtime stage installs packages"; else echo "not ok - runtime stage installs packages"; fi

needed=$(for b in "$BIN"/*; do readelf -d "$b" 2>/dev/null | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p'; done | sort -u)
[ -n "$needed" ] && echo "ok - binaries have NEEDED libraries" || echo "not ok - binaries have NEEDED libraries"
for lib in $needed; do
	case $lib in libasan.so*|libubsan.so*) echo "# $lib: sanitizer build only, not shipped"; continue ;; esac
	path=$(ldd "$BIN/gpukmm" "$BIN"/gpukmm-* 2>/dev/null | awk -v l="$lib" '$1==l{print $3; exit}')
	[ -z "$path" ] && path=$(ldconfig -p | awk -v l="$lib" '$1==l{print $NF; exit}')
	pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1)
	[ -z "$pkg" ] && pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1)
	if [ -n "$pkg" ] && grep -qx "$pkg" <<<"$pkgs$(printf '\n%s' $base)"; then
		echo "ok - $lib comes from $pkg, installed in the runtime stage"
	else
		echo "not ok - $lib ($path, package '${pkg:-?}') is installed in the runtime stage"
	fi
done
last=$(awk '/^FROM/{s=""} {s=s"\n"$0} END{print s}' "$CF")
grep -q '^USER 65532' <<<"$last" && echo "ok - runtime runs as USER 65532" || echo "not ok - runtime runs as USER 65532"
grep -q '^ENTRYPOINT \["/usr/bin/gpukmm"\]' <<<"$last" && echo "ok - entrypoint is the supervisor" ||
	echo "not ok - entrypoint is the supervisor"
grep -q 'make install PREFIX=/usr DESTDIR=/out' "$CF" && echo "ok - build stage installs to a staging root" ||
	echo "not ok - build stage installs to a staging root"
# a build package in the runtime stage would bloat it
grep -q -- '-dev' <<<"$pkgs" && echo "not ok - no -dev package at runtime" || echo "ok - no -dev package at runtime"
