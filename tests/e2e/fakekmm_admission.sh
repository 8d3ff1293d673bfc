#!/bin/bash
# KMM's Module admission rules through kubesim's webhook call to fake-kmm, as
# kubectl prints them: each rule rejected with KMM's message; valid Modules
# and allowed updates pass.
set -u
. "$GPUKMM_SRC/tests/lib/kubesim.sh"
. "$GPUKMM_SRC/tests/lib/fakekmm.sh"
fakekmm_setup || { echo "not ok - kubesim + fake-kmm start"; exit 1; }
echo "ok - fake-kmm registers its ValidatingWebhookConfiguration"

DENY='admission webhook "vmodule.kb.io" denied the request: '
out="$KUBESIM_DIR/out"
# mod NAME SPEC-JSON → Module JSON in namespace kmm
mod() { echo "{\"apiVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"kind\":\"Module\",\"metadata\":{\"name\":\"$1\",\"namespace\":\"kmm\"},\"spec\":$2}"; }
ml() { echo "{\"selector\":{},\"moduleLoader\":{\"container\":$1}}"; }
KM='"kernelMappings":[{"regexp":"^6\\.","containerImage":"img:1"}]'
MP='"modprobe":{"moduleName":"xe"}'
create() { mod "$1" "$2" | k create -f - >"$out" 2>&1; }
# denied NAME SPEC MESSAGE: create is refused with exactly KMM's message
denied() {
	if create "$1" "$2"; then return 1; fi
	grep -qF -- "Error from server (Forbidden): error when creating \"STDIN\": $DENY$3" "$out" ||
		{ echo "# kubectl said: $(cat "$out")"; return 1; }
}

# Does this kubesim call admission webhooks at all? fake-kmm logs every review.
create probe "$(ml "{$MP,$KM}")"
if ! grep -q "admission: CREATE kmm/probe allowed" "$KUBESIM_DIR/fk.log"; then
	echo "skip - kubesim does not call admission webhooks yet: KMM rules through kubectl not checked"
	exit 0
fi
echo "ok - a valid Module is admitted (kubesim asked fake-kmm)"

check "name + namespace longer than 41" denied aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "$(ml "{$MP,$KM}")" \
	"module name and namespace have a combined length of 48 characters, which exceeds the maximum of 41 when version is set"
check "toleration operator Lt" denied t1 '{"selector":{},"tolerations":[{"key":"k","operator":"Lt","value":"1"}]}' \
	"failed to validate Module's tolerations: Toleration[0] invalid operator 'Lt', allowed values are ['Equal', 'Exists']"
check "toleration Exists with a value" denied t2 '{"selector":{},"tolerations":[{"key":"k","operator":"Exists","value":"v"}]}' \
	"failed to validate Module's tolerations: Toleration[0] value must be empty when operator is 'Exists'"
check "tolerationSeconds without NoExecute" denied t3 '{"selector":{},"tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule","tolerationSeconds":3}]}' \
	"failed to validate Module's tolerations: Toleration[0] effect must be 'NoExecute' when tolerationSeconds is set"
check "regexp and literal" denied k1 "$(ml "{$MP,\"kernelMappings\":[{\"regexp\":\"^6\",\"literal\":\"6.1\",\"containerImage\":\"i:1\"}]}")" \
	"failed to validate kernel mappings: regexp and literal are mutually exclusive properties at kernelMappings[0]"
check "neither regexp nor literal" denied k2 "$(ml "{$MP,\"kernelMappings\":[{\"containerImage\":\"i:1\"}]}")" \
	"failed to validate kernel mappings: regexp or literal must be set at kernelMappings[0]"
check "invalid RE2 regexp" denied k3 "$(ml "{$MP,\"kernelMappings\":[{\"regexp\":\"^6(\",\"containerImage\":\"i:1\"}]}")" \
	"failed to validate kernel mappings: invalid regexp at index 0: error parsing regexp: missing closing ): \`^6(\`"
check "image without tag or digest" denied k4 "$(ml "{$MP,\"kernelMappings\":[{\"literal\":\"6.1\",\"containerImage\":\"registry/img\"}]}")" \
	"failed to validate kernel mappings: failed to validate image format: container image must explicitely set a tag or digest; got: registry/img"
check "mapping without image and no default" denied k5 "$(ml "{$MP,\"kernelMappings\":[{\"literal\":\"6.1\",\"containerImage\":\"\"}]}")" \
	"failed to validate kernel mappings: missing spec.moduleLoader.container.kernelMappings[0].containerImage"
check "both in-tree fields" denied k6 "$(ml "{$MP,$KM,\"inTreeModulesToRemove\":[\"a\"],\"inTreeModuleToRemove\":\"b\"}")" \
	"failed to validate kernel mappings: only one of the Container's fields: InTreeModulesToRemove or InTreeModuleToRemove can be defined"
check "rawArgs with moduleName" denied m1 "$(ml "{\"modprobe\":{\"moduleName\":\"xe\",\"rawArgs\":{\"load\":[\"xe\"],\"unload\":[\"xe\"]}},$KM}")" \
	"failed to validate modprobe: rawArgs cannot be set when moduleName is set"
check "neither moduleName nor rawArgs" denied m2 "$(ml "{\"modprobe\":{},$KM}")" \
	"failed to validate modprobe: load and unload rawArgs must be set when moduleName is unset"
check "modulesLoadingOrder of one" denied m3 "$(ml "{\"modprobe\":{\"moduleName\":\"xe\",\"modulesLoadingOrder\":[\"xe\"]},$KM}")" \
	"failed to validate modprobe: if a loading order is defined, at least two values must be defined"
check "modulesLoadingOrder not starting with moduleName" denied m4 "$(ml "{\"modprobe\":{\"moduleName\":\"xe\",\"modulesLoadingOrder\":[\"a\",\"xe\"]},$KM}")" \
	"failed to validate modprobe: if a loading order is defined, the first element must be moduleName"
check "modulesLoadingOrder duplicates" denied m5 "$(ml "{\"modprobe\":{\"moduleName\":\"xe\",\"modulesLoadingOrder\":[\"xe\",\"a\",\"a\"]},$KM}")" \
	"failed to validate modprobe: \"a\": duplicate value in the loading order list"
check "filesToSign outside dirName" denied s1 "$(ml "{$MP,$KM,\"sign\":{\"keySecret\":{\"name\":\"k\"},\"certSecret\":{\"name\":\"c\"},\"filesToSign\":[\"/lib/x.ko\"]}}")" \
	"global Sign: filesToSign[\"/lib/x.ko\"] must be under dirName \"/opt\""
check "DRA on a 1.32 cluster" denied d1 '{"selector":{},"dra":{"driverName":"gpu.intel.com","container":{"image":"dra:1"}}}' \
	"failed to validate DRA: spec.dra requires Kubernetes 1.34 or later; current cluster version is 1.32"
check "hostPath outside the allowed roots" denied h1 '{"selector":{},"devicePlugin":{"container":{"image":"dp:1"},"volumes":[{"name":"v","hostPath":{"path":"/dev/../etc"}}]}}' \
	"failed to validate device plugin volumes: spec.devicePlugin.volumes[0]: hostPath \"/dev/../etc\" is not allowed; only /dev, /sys, /var, /opt and /run paths are permitted"

# updates
mod probe "$(ml "{$MP,$KM,\"version\":\"v1\"}")" | k apply -f - >"$out" 2>&1
check "update from no version to a version is refused" \
	grep -qF "${DENY}cannot update to or from an empty version; please delete the Module and create it again" "$out"
create ver "$(ml "{$MP,$KM,\"version\":\"v1\"}")"
mod ver "$(ml "{$MP,$KM,\"version\":\"v2\"}")" | k apply -f - >"$out" 2>&1
check "update v1 → v2 is allowed" k get module -n kmm ver -o jsonpath='{.spec.moduleLoader.container.version}'
check "… and stored" [ "$(k get module -n kmm ver -o jsonpath='{.spec.moduleLoader.container.version}')" = v2 ]
fakekmm_stop
mod late "$(ml "{$MP,$KM}")" | k create -f - >"$out" 2>&1
check "fake-kmm down: failurePolicy Fail refuses Module creation" [ $? -ne 0 ]
