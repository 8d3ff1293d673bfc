#!/bin/bash
# Issue #17's "done when": a controller started with only $KUBECONFIG (no
# --kubeconfig, no webhook certificate) whose user is an exec credential plugin,
# as EKS, GKE and AKS write them, does its job.
#
# kubesim serves HTTPS with a certificate that names only kube.sim.internal
# (the kubeconfig's tls-server-name; we connect to 127.0.0.1) and requires a
# bearer token; only the fake plugin (tests/fixtures/exec/plugin.sh) prints it. $KUBECONFIG is a list of three: a file that does not
# exist, the cluster/context file and the user file in another directory whose
# plugin command is relative to it (kubectl's merge and path rules). Then:
# `gpukmm --check` says the webhook is off, the controller becomes ready with
# 5/5 services and says so once (and in /readyz), a ClusterPolicy applied with
# kubectl gets its KMM Module, fake-kmm loads it and the status is written; the
# server rotates its token and so does the plugin: the controller re-runs it on
# the 401 and keeps working. On the code before #17 every API service exited
# with "no Kubernetes configuration" (the supervisor stripped KUBECONFIG) and
# an exec user was refused.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
. tests/lib/proc.sh
kubesim_need_kubectl || exit 0
NS=intel-gpu-base-operator
CP=gpu-kmm
KEY="kmm.node.kubernetes.io/$NS.$CP-gpu.ready"
FAILED=0
D=$(mktemp -d "${TMPDIR:-/tmp}/start-kubeconfig.XXXXXX") || exit 1
chmod 700 "$D"
SUP_PID= FK_PID=
check() { checkf "$@"; } # (tests/lib/proc.sh; not kubesim.sh's check, which sets no FAILED)
teardown() {
	stop_pid "$SUP_PID" 10
	stop_pid "$FK_PID" 10
	san_check "$D"/*.log || FAILED=1
	[ "$FAILED" = 0 ] || log_tails 60 "$D"/*.log
	kubesim_stop
	rm -rf "$D"
}
echo tok-1 >"$D/server-token"
SNI=kube.sim.internal
mkdir -p "$D/pki"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/pki/ca.key" -out "$D/pki/ca.crt" -days 1 -subj /CN=sim-ca 2>/dev/null &&
	openssl req -newkey rsa:2048 -nodes -keyout "$D/pki/srv.key" -out "$D/pki/srv.csr" -subj "/CN=$SNI" 2>/dev/null &&
	printf 'subjectAltName=DNS:%s\n' "$SNI" >"$D/pki/ext" &&
	openssl x509 -req -in "$D/pki/srv.csr" -CA "$D/pki/ca.crt" -CAkey "$D/pki/ca.key" -CAcreateserial \
		-out "$D/pki/srv.crt" -days 1 -extfile "$D/pki/ext" 2>/dev/null ||
	{ echo "not ok - openssl test CA"; exit 1; }
KUBESIM_NO_TRAP=1 kubesim_start --token-file "$D/server-token" --tls-cert "$D/pki/srv.crt" --tls-key "$D/pki/srv.key" ||
	{ echo "not ok - kubesim starts"; exit 1; }
trap teardown EXIT
# the test's own access: kubectl and curl with the server's current token
KUBECTL_FLAGS="--certificate-authority $D/pki/ca.crt --tls-server-name $SNI --token tok-1"
printf 'Authorization: Bearer tok-1\n' >"$D/auth"
KRAW_FLAGS="-k -H @$D/auth"
check "kubesim refuses a request without the token" bash -c \
	"[ \"\$(curl -sk -o /dev/null -w '%{http_code}' '$KUBESIM_URL/api/v1/nodes')\" = 401 ]"

# ---- the cluster: CRDs, nodes, KMM (fake-kmm with a static token) ---------------------
k apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml \
	-f tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml >"$D/apply.log" 2>&1
check "namespace and CRDs applied with kubectl" k wait --for condition=established --timeout=20s \
	crd/clusterpolicies.intel.com crd/modules.kmm.sigs.x-k8s.io
kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-1","labels":{"kubernetes.io/arch":"amd64","intel.feature.node.kubernetes.io/gpu":"true"}},"status":{"nodeInfo":{"kernelVersion":"6.8.0-45-generic"},"conditions":[{"type":"Ready","status":"True"}]}}' >/dev/null
cat >"$D/fk-kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: sim
clusters: [{name: sim, cluster: {server: "$KUBESIM_URL", certificate-authority: pki/ca.crt, tls-server-name: $SNI}}]
users: [{name: fk, user: {tokenFile: server-token}}]
contexts: [{name: sim, context: {cluster: sim, user: fk}}]
EOF
"$GPUKMM_BIN/fake-kmm" --kubeconfig "$D/fk-kubeconfig" --load-delay-ms 100 --unload-delay-ms 100 \
	>>"$D/fake-kmm.log" 2>&1 &
FK_PID=$!

# ---- $KUBECONFIG: a missing file, the cluster file, the user file (exec plugin) -------
mkdir -p "$D/users/bin"
cp tests/fixtures/exec/plugin.sh "$D/users/bin/get-token"
echo tok-1 >"$D/plugin-token"
cat >"$D/cluster.yaml" <<EOF
apiVersion: v1
kind: Config
current-context: sim
clusters: [{name: sim, cluster: {server: "$KUBESIM_URL", certificate-authority: pki/ca.crt, tls-server-name: $SNI}}]
contexts: [{name: sim, context: {cluster: sim, user: eks-admin}}]
EOF
cat >"$D/users/user.yaml" <<EOF
apiVersion: v1
kind: Config
current-context: not-this-one
users:
- name: eks-admin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: bin/get-token
      args: [eks, get-token, --cluster-name, sim]
      env:
      - {name: PLUGIN_TOKEN_FILE, value: "$D/plugin-token"}
      - {name: PLUGIN_LOG, value: "$D/plugin.log"}
      - {name: PLUGIN_API, value: client.authentication.k8s.io/v1beta1}
      - {name: PLUGIN_EXPIRY_S, value: "900"}
      provideClusterInfo: false
      interactiveMode: IfAvailable
EOF
export KUBECONFIG="$D/missing.yaml:$D/cluster.yaml:$D/users/user.yaml"
# kubectl reads the same list the same way (the plugin gives it the token too)
check "kubectl with the same \$KUBECONFIG works (through the plugin)" \
	env -u KUBECTL_FLAGS "$KUBECTL" --cache-dir "$KUBESIM_DIR/kcache2" get nodes gpu-1

"$GPUKMM_BIN/gpukmm" --profile controller --check >"$D/check.log" 2>&1
rc=$?
check "gpukmm --check: exit 0 (rc $rc)" test "$rc" = 0
check "gpukmm --check: the webhook is off, and why" grep -q '^note: webhook: off: no serving certificate' "$D/check.log"
check "gpukmm --check: no webhook in the service table" bash -c "! grep -q '^webhook ' '$D/check.log'"

GPUKMM_LOG_LEVEL=info "$GPUKMM_BIN/gpukmm" --profile controller --runtime-dir "$D/run" \
	--http-listen 127.0.0.1:0 >"$D/gpukmm.log" 2>&1 &
SUP_PID=$!
check "controller ready: 5/5 required services (no webhook)" wait_until 60 \
	grep -q 'ready: 5/5 required services ready' "$D/gpukmm.log"
n=$(grep -c 'webhook: off: no serving certificate' "$D/gpukmm.log")
check "the webhook being off is said once ($n)" test "$n" = 1
HPORT=$(grep -o 'http: listening on 127.0.0.1:[0-9]*' "$D/gpukmm.log" | head -1 | grep -o '[0-9]*$')
curl -s -o "$D/readyz" -w '%{http_code}' "http://127.0.0.1:$HPORT/readyz" >"$D/readyz.code" 2>/dev/null
check "/readyz: 200" test "$(cat "$D/readyz.code")" = 200
check "/readyz detail: the webhook is off" grep -q '^webhook: off' "$D/readyz"
check "the plugin ran (no token anywhere else)" test -s "$D/plugin.log"
wpid=$(pgrep -P "$SUP_PID" -x gpukmm-watcher)
check "the watcher got the \$KUBECONFIG list" grep -qz "^KUBECONFIG=$KUBECONFIG\$" "/proc/$wpid/environ"

# ---- the controller does its job -------------------------------------------------------
node_ready() { k get node gpu-1 -o json | jq -e ".metadata.labels[\"$KEY\"] == \"\""; }
not_ready() { k get node gpu-1 -o json >/dev/null && ! node_ready; }
check "no ready label before the policy (the check can fail)" not_ready
check "kubectl apply -f deploy/examples/clusterpolicy-kmm.yaml" k apply -f deploy/examples/clusterpolicy-kmm.yaml
check "KMM Module $NS/$CP-gpu created" wait_until 30 k -n "$NS" get module "$CP-gpu"
check "fake-kmm loaded the module on gpu-1" wait_until 30 node_ready
kmm_col() { [ "$(k get clusterpolicy "$CP" --no-headers | awk '{print $5}')" = 1/1 ]; }
check "status written: kubectl get clusterpolicy shows KMM 1/1" wait_until 40 kmm_col
k get clusterpolicy "$CP" | sed 's/^/#   /'

# ---- token rotation: the server and the plugin move to tok-2 ---------------------------
runs=$(wc -l <"$D/plugin.log")
echo tok-2 >"$D/plugin-token"
echo tok-2 >"$D/server-token"
KUBECTL_FLAGS="--certificate-authority $D/pki/ca.crt --tls-server-name $SNI --token tok-2"
printf 'Authorization: Bearer tok-2\n' >"$D/auth"
k patch clusterpolicy "$CP" --type merge -p '{"spec":{"kernelModule":{"firmwarePath":"/opt/lib/firmware/xe2"}}}' >/dev/null
fw() { k -n "$NS" get module "$CP-gpu" >/dev/null && k -n "$NS" get module "$CP-gpu" -o json | jq -e '.spec.moduleLoader.container.modprobe.firmwarePath == "/opt/lib/firmware/xe2"'; }
check "after the rotation the Module follows the policy (plugin re-run on the 401)" wait_until 30 fw
check "the plugin was re-run" bash -c "[ \$(wc -l <'$D/plugin.log') -gt $runs ]"
restarts=$(grep -c 'restarting in' "$D/gpukmm.log")
check "no service restarted ($restarts)" test "$restarts" = 0
check "no token in the controller's log" bash -c "! grep -q 'tok-[12]' '$D/gpukmm.log'"

stop_pid "$SUP_PID" 10
rc=$STOP_RC
SUP_PID=
check "gpukmm exits 0 on SIGTERM (rc $rc)" test "$rc" = 0

# ---- --token-file: a kubeconfig without a user, the token from a file (systemd units) ----
# every API service reads its token from --token-file (before, only the watcher
# did: modmgr, gater, opmgr and statusd got 401s and the Module never followed)
cat >"$D/nouser.yaml" <<EOF
apiVersion: v1
kind: Config
current-context: sim
clusters: [{name: sim, cluster: {server: "$KUBESIM_URL", certificate-authority: pki/ca.crt, tls-server-name: $SNI}}]
users: [{name: nobody, user: {}}]
contexts: [{name: sim, context: {cluster: sim, user: nobody}}]
EOF
cp "$D/server-token" "$D/api-token"
GPUKMM_LOG_LEVEL=info "$GPUKMM_BIN/gpukmm" --profile controller --runtime-dir "$D/run2" \
	--kubeconfig "$D/nouser.yaml" --token-file "$D/api-token" >"$D/gpukmm-tokenfile.log" 2>&1 &
SUP_PID=$!
check "--token-file: controller ready" wait_until 60 grep -q 'ready: 5/5 required services ready' "$D/gpukmm-tokenfile.log"
k patch clusterpolicy "$CP" --type merge -p '{"spec":{"kernelModule":{"firmwarePath":"/opt/lib/firmware/xe3"}}}' >/dev/null
fw3() { k -n "$NS" get module "$CP-gpu" -o json | jq -e '.spec.moduleLoader.container.modprobe.firmwarePath == "/opt/lib/firmware/xe3"'; }
check "--token-file: modmgr authenticates (the Module follows the policy)" wait_until 30 fw3
gen() { k get clusterpolicy "$CP" -o json | jq -e '.status.observedGeneration == .metadata.generation'; }
check "--token-file: statusd authenticates (status of the new generation written)" wait_until 30 gen
n401=$(grep -c ' 401' "$D/gpukmm-tokenfile.log")
check "--token-file: no 401 in the log ($n401)" test "$n401" = 0
stop_pid "$SUP_PID" 10
rc=$STOP_RC
SUP_PID=
check "gpukmm (--token-file) exits 0 on SIGTERM (rc $rc)" test "$rc" = 0
exit $FAILED
