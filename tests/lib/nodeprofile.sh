# The node side of a simulated cluster: one `gpukmm --profile node` (gpukmm-prober
# on a fake node root + gpukmm-statusd --mode node) per GPU node, as the demo, the
# chaos test and the node scenario tests run it. Sources tests/lib/kubesim.sh.
# The node statusd hands its reports to the controller as NodeReportRequests: each
# node gets what the kubelet gives the DaemonSet's pod, a Pod object on the node
# (gpukmm-node-NODE, ServiceAccount gpukmm-node) and a token of it for the audience
# gpukmm.io/node-report (np_report_token); the controller's statusd applies them.
#
#   np_init DIR KUBECONFIG [NS] where everything goes (DIR/np), the kubeconfig the
#                               node statusd writes with (under RBAC: ServiceAccount
#                               gpukmm-node's, kubesim_sa_kubeconfig), the operator
#                               namespace (default intel-gpu-base-operator)
#   np_report_token NODE FILE   the node pod (created once) and its report token in FILE
#   np_start NODE KERNEL        the fake roots for KERNEL (built once per build dir and shared:
#                               "oot-avail" = GPU, OoT xe installed, not loaded;
#                               "oot-idle" = OoT xe loaded; tests/fixtures/probe-fixture.sh)
#                               and starts the node supervisor: NP_PID[NODE]
#   np_flavor NODE sb           before np_start: a Secure Boot node (roots "sb-avail",
#                               "sb-idle": Secure Boot on, lockdown integrity)
#   np_kernel NODE KERNEL       the node boots another kernel (its root follows; the
#                               Node's status.nodeInfo is the caller's business)
#   np_follow_start             the stand-in for KMM's worker pods: a watch of the Nodes that points
#                               each node's root at "oot-idle" while fake-kmm records a
#                               module loaded there (annotation fake-kmm.gpukmm.io/loaded.*,
#                               "<kernel>[ <version>]": with a version, the root
#                               "oot-idle@<version>", whose OoT xe is that version, a
#                               build of its own) and at "oot-avail" otherwise
#   np_pin NODE SCENARIO        the node's root is that fixture scenario (e.g. oot-vfs:
#                               VFs active, xe cannot be unloaded) until np_unpin NODE
#   np_pids NODE                the node supervisor's pid and its children's
#   np_stop NODE / np_stop_all  SIGTERM (SIGKILL after 15 s); NP_RC = the supervisor's
#                               exit code (0: it and its services stopped cleanly)
#   np_nodes                    the nodes started so far
# NP_LOG_LEVEL (default warn), NP_INTERVAL_MS (prober interval, default 1000),
# NP_SUP_ARGS (more arguments of the node supervisor, e.g. --metrics-listen 127.0.0.1:0).

. "${GPUKMM_SRC:-.}/tests/lib/kubesim.sh"
. "$GPUKMM_SRC/tests/lib/proc.sh"
declare -A NP_PID=()
NP_DIR= NP_KUBECONFIG= NP_FOLLOW_PID= NP_RC=0 NP_NS=

np_init() { # DIR KUBECONFIG [NS]
	NP_DIR=$1/np NP_KUBECONFIG=$2 NP_NS=${3:-intel-gpu-base-operator}
	mkdir -p "$NP_DIR/fx"
}

# As the kubelet does for the DaemonSet's pod: a pod bound to the node, and a token
# of it (ServiceAccount gpukmm-node) for the audience gpukmm.io/node-report.
np_report_token() { kubesim_pod_token "$NP_NS" gpukmm-node "$1" "gpukmm-node-$1" gpukmm.io/node-report "$2"; }

np_flavor() { # NODE FLAVOR (oot | sb)
	mkdir -p "$NP_DIR/$1"
	echo "$2" >"$NP_DIR/$1/flavor"
}
np_flavor_of() { local f; np_get f "$NP_DIR/$1/flavor" oot; echo "$f"; }
np_get() { # VAR FILE DEFAULT: VAR = FILE's first line, DEFAULT when it cannot be read (no process)
	{ IFS= read -r "$1" <"$2"; } 2>/dev/null || printf -v "$1" '%s' "$3"
}

np_fixture() { # KERNEL SCENARIO[@MODULE_VERSION]: one root, built once per build dir (shared, read-only)
	[ -d "$NP_DIR/fx/$1/$2" ] && return 0
	local base root
	case $BUILD in /*) base=$BUILD/fixtures/probe ;; *) base=$GPUKMM_SRC/$BUILD/fixtures/probe ;; esac
	root=$(GK_FIXTURE_KVER=$1 "$GPUKMM_SRC/tests/fixtures/probe-fixture.sh" "$2" "$base" 2>>"$NP_DIR/fixtures.log") &&
		mkdir -p "$NP_DIR/fx/$1" && ln -sfn "$root" "$NP_DIR/fx/$1/$2"
}
np_fixtures() { # KERNEL [FLAVOR]: the two roots of that kernel, built once
	local f=${2:-oot}
	np_fixture "$1" "$f-avail" && np_fixture "$1" "$f-idle"
}
# A node's pin, state and root change only under its lock: the follower checks the
# pin and switches the root under it, so a pin never lands between that check and
# that switch (which would put the follower's root back over the pinned one).
np_locked() { # NODE COMMAND... (an eval'd command sees the caller's locals, not its $1..)
	mkdir -p "$NP_DIR/$1"
	(flock 9 && shift && "$@") 9>"$NP_DIR/$1/lock"
}
np_set_root() { # NODE KERNEL SCENARIO
	echo "$3" >"$NP_DIR/$1/state"
	ln -sfn "$NP_DIR/fx/$2/$3" "$NP_DIR/$1/root"
}
np_pin() { # NODE SCENARIO
	local node=$1 scen=$2 kv
	kv=$(cat "$NP_DIR/$node/kernel") && np_fixture "$kv" "$scen" || return 1
	np_locked "$node" eval 'echo "$scen" >"$NP_DIR/$node/pin" && np_set_root "$node" "$kv" "$scen"'
}
np_unpin() { rm -f "$NP_DIR/$1/pin"; }

np_kernel() { # NODE KERNEL
	np_fixtures "$2" "$(np_flavor_of "$1")" || return 1
	local node=$1 kv=$2
	mkdir -p "$NP_DIR/$node"
	echo "$kv" >"$NP_DIR/$node/kernel"
	np_locked "$node" eval 'ln -sfn "$NP_DIR/fx/$kv/$(np_state "$node")" "$NP_DIR/$node/root"'
}
np_state() { local f s; np_get f "$NP_DIR/$1/flavor" oot; np_get s "$NP_DIR/$1/state" "$f-avail"; echo "$s"; }

np_start() { # NODE [KERNEL]: KERNEL defaults to the node's last one
	local n=$1 kv=${2:-$(cat "$NP_DIR/$1/kernel" 2>/dev/null)}
	[ -n "$kv" ] || return 1
	np_kernel "$n" "$kv" || return 1
	[ -s "$NP_DIR/$n/report-token" ] || np_report_token "$n" "$NP_DIR/$n/report-token" || return 1
	cat >"$NP_DIR/$n/node.json" <<J
{"services": [
  {"name": "prober", "args": ["--root", "$NP_DIR/$n/root", "--interval-ms", "${NP_INTERVAL_MS:-1000}", "--debounce-ms", "100"]},
  {"name": "statusd", "credentials": true, "args": ["--mode", "node", "--debounce-ms", "100",
   "--namespace", "$NP_NS", "--report-token-file", "$NP_DIR/$n/report-token"]}
]}
J
	# shellcheck disable=SC2086
	NODE_NAME=$n GPUKMM_LOG_LEVEL=${NP_LOG_LEVEL:-warn} "$GPUKMM_BIN/gpukmm" --profile node \
		--config "$NP_DIR/$n/node.json" --runtime-dir "$NP_DIR/$n/run" --kubeconfig "$NP_KUBECONFIG" \
		${NP_SUP_ARGS:-} >>"$NP_DIR/node-$n.log" 2>&1 &
	NP_PID[$n]=$!
}

np_nodes() { printf '%s\n' "${!NP_PID[@]}" | sort; }
np_pids() { # NODE: the supervisor and its live children
	local p=${NP_PID[$1]:-}
	[ -n "$p" ] || return 0
	echo "$p"
	pgrep -P "$p" 2>/dev/null
}

np_stop() { # NODE
	stop_pid "${NP_PID[$1]:-}" 15
	NP_RC=$STOP_RC
	unset "NP_PID[$1]"
}

np_stop_all() { # prints "ok"/"not ok" per node supervisor when NP_CHECK=1
	local n
	np_follow_stop
	for n in $(np_nodes); do
		np_stop "$n"
		[ -n "${NP_CHECK:-}" ] || continue
		if [ "$NP_RC" = 0 ]; then echo "ok - gpukmm --profile node ($n) stopped cleanly on SIGTERM"
		else echo "not ok - gpukmm --profile node ($n) stopped cleanly on SIGTERM (exit $NP_RC)"; fi
	done
}

# The follower: one watch of the Nodes (curl) and one jq that prints "NAME<tab>VERSION" at
# every change of a node ("-": no module recorded; "!": the node was deleted), read by this
# loop as they come (read_line: a line that a timeout cut is not lost). A node's root is
# switched only when its state changes (the prober sees the new tree on its next interval).
# After 0.3 s without an event, every node known is looked at again (builtins only: no
# process per node and round), for what changes outside the API: a pin lifted, a node's
# kernel. A watch that ends (its timeout, kubesim restarted) is opened again; its
# synthetic ADDED events give every node's state anew. Flavor "sb": the roots of a
# Secure Boot node.
np_follow_one() { # NODE VERSION
	local n=$1 ver=$2 fl want st kv
	[ -f "$NP_DIR/$n/kernel" ] && [ ! -f "$NP_DIR/$n/pin" ] || return 0
	np_get fl "$NP_DIR/$n/flavor" oot
	want=$fl-avail
	if [ "$ver" != - ]; then
		want=$fl-idle
		[ -n "$ver" ] && want=$want@$ver
	fi
	np_get st "$NP_DIR/$n/state" "$fl-avail"
	[ "$st" = "$want" ] && return 0
	np_get kv "$NP_DIR/$n/kernel" ""
	np_fixture "$kv" "$want" || return 0
	np_locked "$n" eval '[ ! -f "$NP_DIR/$n/pin" ] && np_set_root "$n" "$kv" "$want"'
}
np_follow_start() {
	(
		c= j= wfd= n= v= line= rc=
		declare -A vers=()
		trap 'kill $c $j 2>/dev/null; exit 0' TERM
		while :; do
			kwatch "$NP_DIR/nodes.watch" "/api/v1/nodes?watch=1&timeoutSeconds=900" || exit 1
			c=$KWATCH_PID
			exec {wfd}< <(exec jq --unbuffered -r 'select(.type == "ADDED" or .type == "MODIFIED" or
				.type == "DELETED") | [.object.metadata.name, if .type == "DELETED" then "!" else
				((.object.metadata.annotations // {}) | to_entries |
				 map(select(.key | startswith("fake-kmm.gpukmm.io/loaded."))) |
				 if length == 0 then "-" else (.[0].value | split(" ") | .[1] // "") end) end] | @tsv' \
				<"$NP_DIR/nodes.watch" 2>/dev/null)
			j=$!
			while :; do
				read_line "$wfd" 0.3 line
				rc=$?
				if [ $rc = 0 ]; then
					n=${line%%$'\t'*} v=${line#*$'\t'}
					if [ "$v" = "!" ]; then unset "vers[$n]"; else vers[$n]=$v; np_follow_one "$n" "$v"; fi
				elif [ $rc = 2 ]; then
					for n in "${!vers[@]}"; do np_follow_one "$n" "${vers[$n]}"; done
				else
					break # the watch ended
				fi
			done
			exec {wfd}<&-
			kill "$c" "$j" 2>/dev/null
			wait "$c" "$j" 2>/dev/null
			c= j=
			nap 0.3
		done
	) >/dev/null 2>&1 &
	NP_FOLLOW_PID=$!
}
np_follow_stop() {
	[ -n "$NP_FOLLOW_PID" ] || return 0
	kill -TERM "$NP_FOLLOW_PID" 2>/dev/null
	wait "$NP_FOLLOW_PID" 2>/dev/null
	NP_FOLLOW_PID=
}
