# Shell helpers for the fake-kmm end-to-end tests: source after tests/lib/kubesim.sh.
#
#   fakekmm_setup [fake-kmm flags...]  kubesim + the KMM CRD + a kubeconfig + fake-kmm
#                                      (load/unload delays 200 ms), namespace kmm;
#                                      installs an EXIT trap that stops both
#   fakekmm_start / fakekmm_stop       (re)start or SIGTERM fake-kmm ($FK_RC: its exit code)
#   node NAME KERNEL 'LABELS-JSON-MEMBERS'   create/replace a Node (status.nodeInfo.kernelVersion)
#   kernel NODE KERNEL                 change kernelVersion (status subresource)
#   taints NODE JSON                   replace spec.taints (merge patch)
#   module NAME ['SPEC-MEMBERS'] ['CONTAINER-MEMBERS']  apply Module kmm/NAME selecting gpu=yes,
#                                      mappings regexp ^6\.8\. and literal 6.1.0-lit
#   ready NODE MOD / not_ready NODE MOD     ready label kmm.node.kubernetes.io/kmm.MOD.ready
#   has_label NODE KEY=VALUE / no_label NODE KEY / loaded_is NODE MOD VALUE
#   counts MOD → "matching/desired/available" (status.moduleLoader), counts_are MOD M/D/A
#   gone MOD / has_finalizer MOD
FK_BIN=${FK_BIN:-$GPUKMM_BIN/fake-kmm}
FK_CRD=${FK_CRD:-$GPUKMM_SRC/tests/fixtures/kmm/modules.kmm.sigs.x-k8s.io.crd.yaml}
FKPID=
FK_RC=

fakekmm_start() {
	"$FK_BIN" --kubeconfig "${KUBESIM_DIR:?kubesim not running}/kubeconfig" --load-delay-ms 200 --unload-delay-ms 200 "$@" \
		2>>"$KUBESIM_DIR/fk.log" &
	FKPID=$!
}

fakekmm_stop() {
	FK_RC=
	[ -n "$FKPID" ] || return 0
	kill -TERM "$FKPID" 2>/dev/null
	wait "$FKPID"
	FK_RC=$?
	FKPID=
}

fakekmm_cleanup() {
	if [ -n "$FKPID" ]; then kill "$FKPID" 2>/dev/null; wait "$FKPID" 2>/dev/null; FKPID=; fi
	if [ -n "${KUBESIM_DIR:-}" ] && grep -qE "Sanitizer|runtime error" "$KUBESIM_DIR/fk.log" 2>/dev/null; then
		echo "not ok - fake-kmm ran clean under the sanitizers"
		grep -A20 -E "Sanitizer|runtime error" "$KUBESIM_DIR/fk.log" | sed 's/^/#   /' | head -40
	fi
	kubesim_stop
}

fakekmm_setup() {
	KUBESIM_NO_TRAP=1
	kubesim_start || return 1
	trap fakekmm_cleanup EXIT
	k apply -f "$FK_CRD" >/dev/null || return 1
	cat >"${KUBESIM_DIR:?kubesim not running}/kubeconfig" <<EOT
apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "$KUBESIM_URL"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: sim, user: u}}]
current-context: c
EOT
	echo '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kmm"}}' | k apply -f - >/dev/null || return 1
	fakekmm_start "$@"
	wait_for 20 k get validatingwebhookconfiguration fake-kmm-validating-webhook-configuration
}

kapply() { k apply -f - >/dev/null; }
node() {
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",\"labels\":{$3}},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"}}}" | kapply
}
kernel() { k patch node "$1" --subresource=status --type=merge -p "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"}}}" >/dev/null; }
taints() { k patch node "$1" --type=merge -p "{\"spec\":{\"taints\":$2}}" >/dev/null; }
labels() { k get node "$1" -o go-template='{{range $k,$v := .metadata.labels}}{{$k}}={{$v}}{{"\n"}}{{end}}'; }
annotations() { k get node "$1" -o go-template='{{range $k,$v := .metadata.annotations}}{{$k}}={{$v}}{{"\n"}}{{end}}'; }
has_label() { labels "$1" | grep -qxF -- "$2"; }
no_label() { ! labels "$1" | grep -q -- "^$2="; }
ready() { has_label "$1" "kmm.node.kubernetes.io/kmm.$2.ready="; }
not_ready() { k get node "$1" >/dev/null && no_label "$1" "kmm.node.kubernetes.io/kmm.$2.ready"; }
loaded_is() { annotations "$1" | grep -qxF "fake-kmm.gpukmm.io/loaded.kmm.$2=$3"; }
counts() { k get module -n kmm "$1" -o go-template='{{with .status.moduleLoader}}{{or .nodesMatchingSelectorNumber 0}}/{{or .desiredNumber 0}}/{{or .availableNumber 0}}{{else}}none{{end}}'; }
counts_are() { [ "$(counts "$1")" = "$2" ]; }
gone() { ! k get module -n kmm "$1" >/dev/null 2>&1; }
has_finalizer() { k get module -n kmm "$1" -o jsonpath='{.metadata.finalizers}' | grep -q kmm.node.kubernetes.io/module-finalizer; }
module() {
	echo "{\"apiVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"kind\":\"Module\",\"metadata\":{\"name\":\"$1\",\"namespace\":\"kmm\"},
	\"spec\":{\"selector\":{\"gpu\":\"yes\"}${2:+,$2},\"moduleLoader\":{\"container\":{\"modprobe\":{\"moduleName\":\"xe\"},
	\"kernelMappings\":[{\"regexp\":\"^6\\\\.8\\\\.\",\"containerImage\":\"img:\${KERNEL_FULL_VERSION}\"},
	{\"literal\":\"6.1.0-lit\",\"containerImage\":\"img:lit\"}]${3:+,$3}}}}}" | kapply
}
