#!/bin/sh
# Installs the Debian 12 packages gpukmm needs to build, test and run its demo
# (prometheus: for promtool, 2.42 in Debian 12, which checks the metrics, the alert
# rules and their unit tests; its server is not started; libnanomsg-dev: the test binaries
# link Criterion's libnanomsg ahead of libnng, see CRIT_LIBS in the Makefile):
# as root directly, otherwise through sudo when sudo is there (else it lists them). kubectl is not a Debian 12 package: the machines
# this project targets ship it; we only check that it is there.
set -e
PKGS="build-essential pkg-config protobuf-c-compiler libprotobuf-c-dev libnng-dev
libcurl4-openssl-dev libcjson-dev libkmod-dev libpci-dev libcriterion-dev libnanomsg-dev
libmicrohttpd-dev libyaml-dev libpcre2-dev libre2-dev libssl-dev
pciutils kmod runit curl openssl clang libclang-rt-14-dev procps psmisc python3 jq prometheus
python3-jsonschema"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then
		exec sudo "$0" "$@"
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "deps: missing Debian packages:$missing" >&2
		echo "deps: run as root: apt-get install -y$missing" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing
	# the prometheus package we just installed enables its server; we want promtool only
	case " $missing " in *" prometheus "*)
		if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
			systemctl disable --now prometheus >/dev/null 2>&1 || true
		fi ;;
	esac
	echo "deps: installed:$missing"
else
	echo "deps: all Debian packages present"
fi
if ! command -v kubectl >/dev/null 2>&1; then
	echo "deps: kubectl not found on PATH: the kubectl end-to-end tests need it" >&2
	exit 1
fi
