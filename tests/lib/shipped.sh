# The controller as shipped, on kubesim (tests/e2e/full_controller.sh, metrics.sh):
# deploy/controller/deployment.yaml's arguments with only paths and ports changed,
# a test CA for the HTTPS webhook, and the small cluster it runs against. Sources
# tests/lib/kubesim.sh and proc.sh; needs $D (a private temp dir) and $NS.
#
#   shipped_setup USER...        kubesim (its TokenReview knows each USER, a line of
#                                --token-auth-file: token,user,uid,"groups"), $D/kubeconfig,
#                                the test CA (shipped_ca); 1 on failure (kubesim stopped);
#                                the caller then sets its EXIT trap (kubesim_stop in it)
#   shipped_ca                   $D/ca.crt and the webhook serving pair $D/tls.{crt,key}
#                                (SANs: the webhook Service's DNS name, 127.0.0.1)
#   shipped_args                 the Deployment's args, one per line: webhook pair from
#                                $D, every listener on 127.0.0.1:0, runtime dir $D/run,
#                                text logs
#   shipped_cluster              namespace + CRDs (ClusterPolicy, KMM Module), nodes gpu-1
#                                (6.8.0-45-generic) and gpu-2 (RHEL 9 kernel) with a GPU and
#                                cpu-1 without, fake-kmm (FK_PID), the policy's three
#                                DaemonSets gpu-kmm-{device-plugin,gpu-dra,xpu-manager}
#   shipped_webhooks SUP_PID     the shipped webhook configurations, pointed at the
#                                webhook the supervisor SUP_PID runs (caBundle = $D/ca.crt)
#   shipped_port SUP_PID BINARY  the TCP port the supervisor's child BINARY listens on
# kc: kubectl against kubesim (exported for bash -c).

kc() { KUBECONFIG=/dev/null "$KUBECTL" --server "$KUBESIM_URL" --cache-dir "$KUBESIM_DIR/kcache" "$@"; }
export -f kc

shipped_ca() {
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/ca.key" -out "$D/ca.crt" -days 1 -subj /CN=test-ca 2>/dev/null &&
		openssl req -newkey rsa:2048 -nodes -keyout "$D/tls.key" -out "$D/tls.csr" -subj /CN=gpukmm-webhook-service 2>/dev/null &&
		printf 'subjectAltName=DNS:gpukmm-webhook-service.%s.svc,IP:127.0.0.1\n' "$NS" >"$D/ext" &&
		openssl x509 -req -in "$D/tls.csr" -CA "$D/ca.crt" -CAkey "$D/ca.key" -CAcreateserial -out "$D/tls.crt" \
			-days 1 -extfile "$D/ext" 2>/dev/null && chmod 600 "$D/tls.key"
}

shipped_setup() {
	printf '%s\n' "$@" >"$D/users.csv"
	KUBESIM_NO_TRAP=1 kubesim_start --token-auth-file "$D/users.csv" || return 1
	export KUBECTL KUBESIM_URL KUBESIM_DIR
	kubesim_kubeconfig "$D/kubeconfig" test-token
	shipped_ca || { kubesim_stop; return 1; }
}

shipped_args() {
	python3 - "$D" <<'EOF'
import sys, yaml
d = sys.argv[1]
o = next(x for x in yaml.safe_load_all(open("deploy/controller/deployment.yaml")) if x)
for a in o["spec"]["template"]["spec"]["containers"][0]["args"]:
    k = a.split("=", 1)[0]
    a = {"--webhook-tls-cert": f"{k}={d}/tls.crt", "--webhook-tls-key": f"{k}={d}/tls.key",
         "--webhook-listen": f"{k}=127.0.0.1:0", "--runtime-dir": f"{k}={d}/run",
         "--http-listen": f"{k}=127.0.0.1:0", "--metrics-listen": f"{k}=127.0.0.1:0",
         "--log-format": None}.get(k, a)
    if a:
        print(a)
EOF
}

shipped_node() { # NAME KERNEL GPU(true|false)
	local lbl='"kubernetes.io/arch":"amd64"'
	[ "$3" = true ] && lbl="$lbl,\"intel.feature.node.kubernetes.io/gpu\":\"true\""
	kraw POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",\"labels\":{$lbl}},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}" >/dev/null
}

shipped_cluster() {
	kc apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml \
		-f tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml >"$D/apply.log" 2>&1
	kc wait --for condition=established --timeout=20s crd/clusterpolicies.intel.com \
		crd/modules.kmm.sigs.x-k8s.io >>"$D/apply.log" 2>&1 || return 1
	shipped_node gpu-1 6.8.0-45-generic true
	shipped_node gpu-2 5.14.0-427.13.1.el9_4.x86_64 true
	shipped_node cpu-1 6.8.0-45-generic false
	"$GPUKMM_BIN/fake-kmm" --kubeconfig "$D/kubeconfig" --load-delay-ms 100 --unload-delay-ms 100 \
		>>"$D/fake-kmm.log" 2>&1 &
	FK_PID=$!
	local d
	for d in device-plugin gpu-dra xpu-manager; do
		kraw POST "/apis/apps/v1/namespaces/$NS/daemonsets" "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",
		\"metadata\":{\"name\":\"gpu-kmm-$d\",\"namespace\":\"$NS\"},
		\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"gpu-kmm-$d\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"gpu-kmm-$d\"}},
		\"spec\":{\"nodeSelector\":{\"kubernetes.io/arch\":\"amd64\",\"intel.feature.node.kubernetes.io/gpu\":\"true\"},
		\"containers\":[{\"name\":\"c\",\"image\":\"intel/gpu-kmm-$d:1\"}]}}}}" >/dev/null || return 1
	done
}

shipped_port() { # SUP_PID BINARY
	local p
	p=$(pgrep -P "$1" -x "$2") || return 1
	ss -Htlnp | awk -v p="pid=$p," 'index($0, p) { n = split($4, a, ":"); print a[n]; exit }'
}

shipped_webhooks() { # SUP_PID
	local port
	port=$(shipped_port "$1" gpukmm-webhook) && [ -n "$port" ] || return 1
	kc create --dry-run=client -o json -f deploy/webhook/webhooks.yaml 2>>"$D/apply.log" |
		jq -c --arg cab "$(base64 -w0 "$D/ca.crt")" --arg u "https://127.0.0.1:$port" \
			'(if .kind == "List" then .items[] else . end)
			| .webhooks |= map(.clientConfig = {url: ($u + .clientConfig.service.path), caBundle: $cab})' \
		>"$D/webhooks.json" && kc apply -f "$D/webhooks.json" >>"$D/apply.log" 2>&1
}
