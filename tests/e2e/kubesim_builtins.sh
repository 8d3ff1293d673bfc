#!/bin/bash
# The built-in kinds operands need, with the real kubectl: PodDisruptionBudget with
# the disruption controller's status (`kubectl get pdb` columns), ReplicaSet scale,
# ValidatingAdmissionPolicy/Binding, PriorityClass, RBAC objects, ServiceAccount,
# ConfigMap, Service; the ServiceMonitor and NodeFeatureRule CRD fixtures; --openshift
# (SecurityContextConstraints with the default ones, Routes; absent without the flag).
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
kubesim_need_kubectl || exit 0
kubesim_start --pod-ready-ms 100 || { echo "not ok - kubesim starts"; exit 1; }

out=$(k api-resources --no-headers 2>/dev/null)
for r in "poddisruptionbudgets +pdb +policy/v1 +true +PodDisruptionBudget" \
	"validatingadmissionpolicies +admissionregistration.k8s.io/v1 +false +ValidatingAdmissionPolicy" \
	"validatingadmissionpolicybindings +admissionregistration.k8s.io/v1 +false +ValidatingAdmissionPolicyBinding" \
	"priorityclasses +pc +scheduling.k8s.io/v1 +false +PriorityClass" \
	"replicasets +rs +apps/v1 +true +ReplicaSet" "statefulsets +sts +apps/v1 +true +StatefulSet" \
	"deviceclasses +resource.k8s.io/v1 +false +DeviceClass"; do
	check "api-resources: ${r%% *}" grep -Eq "^$r\$" <<<"$out"
done

# ---- PodDisruptionBudget: a ReplicaSet's 3 pods, 2 of 3 may go ------------------------
k apply -f - >/dev/null <<'Y'
apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web-min, namespace: default}
spec: {minAvailable: 2, selector: {matchLabels: {app: web}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web-max, namespace: default}
spec: {maxUnavailable: "33%", selector: {matchLabels: {app: web}}}
Y
rs_uid=$(k get rs web -o jsonpath='{.metadata.uid}')
for i in 1 2 3; do
	k apply -f - >/dev/null <<Y
apiVersion: v1
kind: Pod
metadata:
  name: web-$i
  namespace: default
  labels: {app: web}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: $rs_uid, controller: true}]
spec: {nodeName: n1, containers: [{name: c, image: nginx}]}
Y
done
pdb_is() { test "$(k get pdb "$1" -o jsonpath='{.status.expectedPods}/{.status.desiredHealthy}/{.status.currentHealthy}/{.status.disruptionsAllowed}')" = "$2"; }
check "minAvailable 2 of 3 ready pods: 1 disruption allowed" wait_for 10 pdb_is web-min 3/2/3/1
check "maxUnavailable 33% of the ReplicaSet's 3 (rounded up: 1): 2 healthy wanted, 1 allowed" wait_for 10 pdb_is web-max 3/2/3/1
check "condition DisruptionAllowed True (SufficientPods)" test \
	"$(k get pdb web-min -o jsonpath='{.status.conditions[?(@.type=="DisruptionAllowed")].reason}')" = SufficientPods
out=$(k get pdb --no-headers)
check "kubectl get pdb: NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS" \
	grep -Eq '^web-max +N/A +33% +1 ' <<<"$out"
check "kubectl get pdb: web-min 2 N/A 1" grep -Eq '^web-min +2 +N/A +1 ' <<<"$out"
k delete pod web-3 --wait=true >/dev/null
check "a pod gone: 0 disruptions allowed, InsufficientPods" wait_for 10 pdb_is web-min 2/2/2/0
check "condition DisruptionAllowed False (InsufficientPods)" test \
	"$(k get pdb web-min -o jsonpath='{.status.conditions[0].status}/{.status.conditions[0].reason}')" = False/InsufficientPods
k patch rs web --type merge -p '{"spec":{"replicas":2}}' >/dev/null
check "the ReplicaSet scaled to 2: maxUnavailable 33% of 2 is 1" wait_for 10 pdb_is web-max 2/1/2/1

# ---- the other kinds operands write -----------------------------------------------------
k apply -f - >/dev/null <<'Y'
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: cp-gpu-dra}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [resource.k8s.io]
      apiVersions: [v1beta1]
      operations: [CREATE, UPDATE, DELETE]
      resources: [resourceslices]
  validations:
  - expression: "true"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: cp-gpu-dra}
spec: {policyName: cp-gpu-dra, validationActions: [Deny]}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gpukmm-critical}
value: 1000000
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: cp-gpu-dra, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cp-gpu-dra}
rules: [{apiGroups: [""], resources: [nodes], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cp-gpu-dra}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cp-gpu-dra}
subjects: [{kind: ServiceAccount, name: cp-gpu-dra, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: default}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: r, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects: [{kind: ServiceAccount, name: cp-gpu-dra, namespace: default}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: xpum-config, namespace: default}
data: {a: b}
---
apiVersion: v1
kind: Service
metadata: {name: intel-xpumanager, namespace: default}
spec: {selector: {app: intel-xpumanager}, ports: [{name: http, port: 8080, targetPort: http}]}
Y
check "VAP, VAPB, PriorityClass, RBAC, ServiceAccount, ConfigMap, Service applied" test "$(k get \
	validatingadmissionpolicy/cp-gpu-dra validatingadmissionpolicybinding/cp-gpu-dra priorityclass/gpukmm-critical \
	sa/cp-gpu-dra clusterrole/cp-gpu-dra clusterrolebinding/cp-gpu-dra role/r rolebinding/r cm/xpum-config \
	svc/intel-xpumanager -o name | wc -l)" = 10

# ---- CRD fixtures of other projects --------------------------------------------------------
k apply -f tests/fixtures/crds/ >/dev/null
check "ServiceMonitor and NodeFeatureRule CRDs established" k wait --for condition=established --timeout=10s \
	crd/servicemonitors.monitoring.coreos.com crd/nodefeaturerules.nfd.k8s-sigs.io
k apply -f - >/dev/null <<'Y'
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: intel-xpumanager, namespace: default, labels: {app: intel-xpumanager}}
spec:
  selector: {matchLabels: {app: intel-xpumanager}}
  namespaceSelector: {matchNames: [default]}
  endpoints: [{port: http, path: /metrics, interval: 5s}]
---
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: intel-gpu-devices}
spec:
  rules:
  - name: intel.gpu
    labels: {intel.feature.node.kubernetes.io/gpu: "true"}
    matchFeatures: [{feature: pci.device, matchExpressions: {vendor: {op: In, value: ["8086"]}}}]
Y
check "ServiceMonitor created (namespaced), spec kept" \
	test "$(k get smon intel-xpumanager -o jsonpath='{.spec.endpoints[0].interval}')" = 5s
check "NodeFeatureRule created (cluster-scoped)" \
	test "$(k get nodefeaturerule intel-gpu-devices -o jsonpath='{.metadata.namespace}{.spec.rules[0].name}')" = intel.gpu
check "not OpenShift by default: no security.openshift.io, no route.openshift.io" \
	bash -c "! KUBECONFIG=/dev/null $KUBECTL --server $KUBESIM_URL --cache-dir $KUBESIM_DIR/kcache api-versions | grep -q openshift.io"
kubesim_stop

# ---- --openshift ---------------------------------------------------------------------------
kubesim_start --openshift || { echo "not ok - kubesim --openshift starts"; exit 1; }
out=$(k api-versions 2>/dev/null)
check "--openshift: security.openshift.io/v1 served" grep -qx security.openshift.io/v1 <<<"$out"
check "--openshift: route.openshift.io/v1 served" grep -qx route.openshift.io/v1 <<<"$out"
check "the default SCC restricted-v2 exists (runAsUser MustRunAsRange)" \
	test "$(k get scc restricted-v2 -o jsonpath='{.runAsUser.type}')" = MustRunAsRange
check "the default SCC privileged exists" k get securitycontextconstraints privileged
k apply -f - >/dev/null <<'Y'
apiVersion: security.openshift.io/v1
kind: SecurityContextConstraints
metadata: {name: cp-gpu-dp-scc}
allowHostDirVolumePlugin: true
allowHostIPC: false
allowHostNetwork: false
allowHostPID: false
allowHostPorts: false
allowPrivilegeEscalation: false
allowPrivilegedContainer: false
readOnlyRootFilesystem: false
requiredDropCapabilities: [ALL]
fsGroup: {type: RunAsAny}
runAsUser: {type: RunAsAny}
seLinuxContext: {type: RunAsAny}
supplementalGroups: {type: RunAsAny}
seccompProfiles: ["*"]
users: []
groups: []
volumes: [hostPath, emptyDir]
---
apiVersion: route.openshift.io/v1
kind: Route
metadata: {name: xpum, namespace: default}
spec: {to: {kind: Service, name: intel-xpumanager}}
Y
check "an operand's SCC applied (cluster-scoped) and read back" \
	test "$(k get scc cp-gpu-dp-scc -o jsonpath='{.volumes[0]}/{.metadata.namespace}')" = hostPath/
check "a Route applied" k get route xpum
kubesim_stop
check "kubesim exits 0 on SIGTERM" test $? -eq 0
