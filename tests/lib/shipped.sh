# The controller pod as shipped, on kubesim (tests/e2e/full_controller.sh, metrics.sh):
# deploy/controller/deployment.yaml's containers' arguments with only paths and ports
# changed, a test CA for the HTTPS webhook, and the small cluster it runs against.
# Sources nothing: needs tests/lib/kubesim.sh and proc.sh, $D (a private temp dir) and $NS.
#
#   shipped_ca                   $D/ca.crt and the webhook serving pair $D/tls.{crt,key}
#                                (SANs: the webhook Service's DNS name, 127.0.0.1), also put
#                                where the webhook reads it ($D/webhook-certs: certd's
#                                directory, which certd leaves alone while the cluster has no
#                                Secret gpukmm-webhook-cert)
#   shipped_args CONTAINER       that container's args, one per line: the webhook's
#                                certificate directory $D/webhook-certs (the pod's emptyDir),
#                                every listener on 127.0.0.1:0, runtime dir $D/run-CONTAINER,
#                                text logs
#   shipped_cluster              namespace + CRDs (ClusterPolicy, KMM Module), the shipped RBAC
#                                and the ServiceAccounts' kubeconfigs in $D (kubesim_kubeconfigs),
#                                nodes gpu-1 (6.8.0-45-generic) and gpu-2 (RHEL 9 kernel) with a
#                                GPU and cpu-1 without, fake-kmm as the admin (FK_PID), the
#                                policy's DaemonSets gpu-kmm-{device-plugin,gpu-dra,xpu-manager}
#   shipped_render VARIANT FILE  `kubectl kustomize deploy/VARIANT` as far as kubesim serves
#                                it (the kinds it does not serve left out, named in a comment)
#   shipped_webhook_port PID     the port the webhook of the supervisor PID listens on
#   shipped_webhooks PID         the shipped webhook configurations, pointed at the webhook
#                                the supervisor PID runs (caBundle = $D/ca.crt)

shipped_ca() {
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/ca.key" -out "$D/ca.crt" -days 1 -subj /CN=test-ca 2>/dev/null &&
		openssl req -newkey rsa:2048 -nodes -keyout "$D/tls.key" -out "$D/tls.csr" -subj /CN=gpukmm-webhook-service 2>/dev/null &&
		printf 'subjectAltName=DNS:gpukmm-webhook-service.%s.svc,IP:127.0.0.1\n' "$NS" >"$D/ext" &&
		openssl x509 -req -in "$D/tls.csr" -CA "$D/ca.crt" -CAkey "$D/ca.key" -CAcreateserial -out "$D/tls.crt" \
			-days 1 -extfile "$D/ext" 2>/dev/null && chmod 600 "$D/tls.key" &&
		mkdir -p "$D/webhook-certs" && cp -p "$D/tls.crt" "$D/tls.key" "$D/webhook-certs/"
}

shipped_args() { # CONTAINER
	python3 - "$D" "$1" <<'PY'
import sys, yaml
d, name = sys.argv[1], sys.argv[2]
o = next(x for x in yaml.safe_load_all(open("deploy/controller/deployment.yaml")) if x)
c = next(c for c in o["spec"]["template"]["spec"]["containers"] if c["name"] == name)
for a in c["args"]:
    k = a.split("=", 1)[0]
    a = {"--webhook-tls-cert": f"{k}={d}/tls.crt", "--webhook-tls-key": f"{k}={d}/tls.key",
         "--webhook-cert-dir": f"{k}={d}/webhook-certs", "--webhook-listen": f"{k}=127.0.0.1:0", "--runtime-dir": f"{k}={d}/run-{name}",
         "--http-listen": f"{k}=127.0.0.1:0", "--metrics-listen": f"{k}=127.0.0.1:0",
         "--log-format": None}.get(k, a)
    if a:
        print(a)
PY
}

shipped_cluster() {
	k apply -f deploy/namespace/namespace.yaml -f deploy/crd/intel.com_clusterpolicies.yaml -f deploy/crd/gpukmm.io_nodereportrequests.yaml \
		-f tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml >"$D/apply.log" 2>&1
	k wait --for condition=established --timeout=20s crd/clusterpolicies.intel.com crd/nodereportrequests.gpukmm.io \
		crd/modules.kmm.sigs.x-k8s.io >>"$D/apply.log" 2>&1 || return 1
	kubesim_kubeconfigs "$D" "$NS" || return 1
	local n
	for n in "gpu-1 6.8.0-45-generic true" "gpu-2 5.14.0-427.13.1.el9_4.x86_64 true" "cpu-1 6.8.0-45-generic false"; do
		set -- $n
		local lbl='"kubernetes.io/arch":"amd64"'
		[ "$3" = true ] && lbl="$lbl,\"intel.feature.node.kubernetes.io/gpu\":\"true\""
		kraw POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",\"labels\":{$lbl}},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}" >/dev/null
	done
	"$GPUKMM_BIN/fake-kmm" --kubeconfig "$D/kmm-kubeconfig" --load-delay-ms 100 --unload-delay-ms 100 \
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

shipped_webhook_port() { # SUP_PID: the port its gpukmm-webhook listens on (it binds it at start)
	local p
	p=$(pgrep -P "$1" -x gpukmm-webhook) || return 1
	ss -Htlnp | awk -v p="pid=$p," 'index($0, p) { n = split($4, a, ":"); print a[n]; exit }'
}

shipped_webhooks() { # SUP_PID
	local port
	port=$(shipped_webhook_port "$1")
	[ -n "$port" ] || return 1
	k create --dry-run=client -o json -f deploy/webhook/webhooks.yaml 2>>"$D/apply.log" |
		jq -c --arg cab "$(base64 -w0 "$D/ca.crt")" --arg u "https://127.0.0.1:$port" \
			'(if .kind == "List" then .items[] else . end)
			| .webhooks |= map(.clientConfig = {url: ($u + .clientConfig.service.path), caBundle: $cab})' \
		>"$D/webhooks.json" && k apply -f "$D/webhooks.json" >>"$D/apply.log" 2>&1
}

shipped_render() { # VARIANT FILE
	kubectl kustomize "deploy/$1" >"$2.all" || return 1
	k api-resources -o name >"$2.served" 2>/dev/null || return 1
	python3 - "$2.all" "$2.served" >"$2" 2>"$2.skipped" <<'PY' || return 1
import sys, yaml
served = {l.strip() for l in open(sys.argv[2]) if l.strip()}
plural = {"PodDisruptionBudget": "poddisruptionbudgets", "ResourceQuota": "resourcequotas",
          "PriorityClass": "priorityclasses", "NetworkPolicy": "networkpolicies"}
def res(o):
    g = o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else ""
    return plural.get(o["kind"], o["kind"].lower() + "s") + ("." + g if g else "")
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
keep = [d for d in docs if res(d) in served]
for d in docs:
    if d not in keep:
        print(f"{d['kind']}/{d['metadata']['name']}", file=sys.stderr)
yaml.safe_dump_all(keep, sys.stdout)
PY
	[ -s "$2.skipped" ] && echo "# not served by kubesim (not applied): $(tr '\n' ' ' <"$2.skipped")"
	return 0
}
