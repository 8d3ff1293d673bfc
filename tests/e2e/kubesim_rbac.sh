#!/bin/bash
# kubesim --rbac with the real kubectl (what the e2e tests of the services rely
# on): ServiceAccount tokens from `kubectl create token`, `kubectl auth whoami`,
# `kubectl auth can-i` (and --list), RBAC objects made with `kubectl create
# role|rolebinding` (protobuf bodies), kubectl's Forbidden errors worded as the API
# server's, a --token-auth-file user bound by User and Group subjects, escalate and
# bind, and a deleted ServiceAccount's token refused.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
kubesim_need_kubectl || exit 0

W=$(mktemp -d "${TMPDIR:-/tmp}/kubesim-rbac.XXXXXX") || exit 1
trap 'kubesim_stop; rm -rf "$W"' EXIT
export KUBESIM_NO_TRAP=1
printf '%s\n' 'al1ce-token,alice,1001,"devs,gpu-admins"' >"$W/users.csv"
KUBESIM_RBAC=1 kubesim_start --token-auth-file "$W/users.csv" || { echo "not ok - kubesim starts"; exit 1; }
check "https with an admin token" bash -c "[[ $KUBESIM_URL == https://* ]] && [ -n '$KUBESIM_ADMIN_TOKEN' ]"
as() { local t=$1; shift; KUBECTL_FLAGS="--token $t" k "$@"; }
said() { # WANT CMD...: the command fails and its output contains WANT
	local want=$1 out
	shift
	out=$("$@" 2>&1) && return 1
	grep -qF -- "$want" <<<"$out" || { echo "# got: $out" >&2; return 1; }
}

k create ns team >/dev/null
k -n team create serviceaccount bot >/dev/null
T=$(k -n team create token bot --duration 2h)
check "kubectl create token (TokenRequest)" test -n "$T"
check "kubectl create token refuses under 10 minutes, as the API server" said \
	'spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes' \
	k -n team create token bot --duration 1m
check "kubectl auth whoami: the ServiceAccount and its groups" eval \
	"as '$T' auth whoami | grep -q 'system:serviceaccount:team:bot' && as '$T' auth whoami | grep -q 'system:serviceaccounts:team'"
check "a ServiceAccount without rules cannot list pods (kubectl's Forbidden, the API server's words)" said \
	'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:team:bot" cannot list resource "pods" in API group "" in the namespace "team"' \
	as "$T" -n team get pods
check "anonymous may read /version, not the API" bash -c \
	"[ \$(curl -s -o /dev/null -w '%{http_code}' --cacert $KUBESIM_CA $KUBESIM_URL/version) = 200 ] &&
	 [ \$(curl -s -o /dev/null -w '%{http_code}' --cacert $KUBESIM_CA $KUBESIM_URL/api/v1/pods) = 403 ]"

k -n team create role pods-reader --verb=get,list,watch --resource=pods >/dev/null
k -n team create rolebinding bot-reads --role=pods-reader --serviceaccount=team:bot >/dev/null
check "kubectl create role + rolebinding: the bot lists pods" as "$T" -n team get pods
check "can-i: yes in team" test "$(as "$T" auth can-i list pods -n team)" = yes
check "can-i: no in default" test "$(as "$T" auth can-i list pods -n default 2>/dev/null)" = no
check "can-i --list shows the Role's rule" eval \
	"as '$T' auth can-i --list -n team | grep -qE '^pods +\[\] +\[\] +\[get list watch\]'"

# a --token-auth-file user: bound by name and by group
check "alice (token file) is refused before any binding" said 'User "alice" cannot list resource "nodes"' as al1ce-token get nodes
k create clusterrole node-reader --verb=get,list --resource=nodes >/dev/null
k create clusterrolebinding gpu-admins-read-nodes --clusterrole=node-reader --group=gpu-admins >/dev/null
check "a Group subject binds alice" as al1ce-token get nodes
# escalate: alice may create roles in team but not grant what she does not hold
k -n team create role role-maker --verb=create,update,patch --resource=roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io >/dev/null
k -n team create rolebinding alice-makes-roles --role=role-maker --user=alice >/dev/null
check "alice may create a Role granting what she holds (nodes are cluster rights, held everywhere)" \
	as al1ce-token -n team create role read-nodes --verb=get --resource=nodes
check "not one granting Secrets (escalation, the API server's message)" said \
	'is attempting to grant RBAC permissions not currently held:' \
	as al1ce-token -n team create role read-secrets --verb=get --resource=secrets
check "nor bind a ClusterRole she does not hold (bind)" said \
	'rolebindings.rbac.authorization.k8s.io "alice-admin" is forbidden: user "alice" (groups=["devs" "gpu-admins" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:' \
	as al1ce-token -n team create rolebinding alice-admin --clusterrole=cluster-admin --user=alice
k create clusterrole bind-admin --verb=bind --resource=clusterroles.rbac.authorization.k8s.io --resource-name=cluster-admin >/dev/null
k -n team create rolebinding alice-binds --clusterrole=bind-admin --user=alice >/dev/null
check "with bind on cluster-admin (by name) she may" \
	as al1ce-token -n team create rolebinding alice-admin --clusterrole=cluster-admin --user=alice

# audiences and TokenReview: a pod-bound token for another audience names its node
# to a TokenReview of that audience, and is no API credential
kraw POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}' >/dev/null
kraw POST /api/v1/namespaces/team/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"},"spec":{"nodeName":"n1","serviceAccountName":"bot","containers":[{"name":"c","image":"i"}]}}' >/dev/null
A=$(k -n team create token bot --audience gpukmm.io/node-report --bound-object-kind Pod --bound-object-name p1)
check "kubectl create token --audience --bound-object-kind Pod" test -n "$A"
check "a token for another audience is no API credential (Unauthorized)" said 'Unauthorized' as "$A" -n team get pods
review() { # TOKEN [AUDIENCES-JSON]: the TokenReview's status, as the admin
	kraw POST /apis/authentication.k8s.io/v1/tokenreviews \
		"{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":{\"token\":\"$1\"${2:+,\"audiences\":$2}}}" |
		jq -c .status
}
check "TokenReview for that audience: the ServiceAccount, and the pod's node as extra node-name" eval \
	"review '$A' '[\"gpukmm.io/node-report\"]' | jq -e '.authenticated == true and .user.username == \"system:serviceaccount:team:bot\"
		and .user.extra[\"authentication.kubernetes.io/node-name\"] == [\"n1\"] and .audiences == [\"gpukmm.io/node-report\"]'"
check "TokenReview for the API server's audience: not authenticated, with an error" eval \
	"review '$A' | jq -e '(.authenticated // false) == false and (.error | length > 0)'"
check "TokenReview of an API token for the custom audience: not authenticated" eval \
	"review '$T' '[\"gpukmm.io/node-report\"]' | jq -e '(.authenticated // false) == false'"
check "TokenReview of an API token for the API server: authenticated, no node" eval \
	"review '$T' | jq -e '.authenticated == true and (.user.extra // {} | has(\"authentication.kubernetes.io/node-name\") | not)'"
out=$(KRAW_TOKEN=$T kraw POST /apis/authentication.k8s.io/v1/tokenreviews "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":{\"token\":\"$A\"}}")
check "TokenReview needs create on tokenreviews (403)" eval \
	"[ \"\$(kraw_code)\" = 403 ] && jq -e '.message | contains(\"cannot create resource \\\"tokenreviews\\\" in API group \\\"authentication.k8s.io\\\" at the cluster scope\")' <<<'$out'"
kraw DELETE /api/v1/namespaces/team/pods/p1 >/dev/null
# (a graceful deletion: the pod is gone once kubesim's kubelet has stopped it)
check "the pod deleted: its token no longer authenticates" wait_for 10 eval \
	"review '$A' '[\"gpukmm.io/node-report\"]' | jq -e '(.authenticated // false) == false'"

# a deleted ServiceAccount's token is dead
k -n team delete serviceaccount bot >/dev/null
check "the deleted ServiceAccount's token is refused (Unauthorized)" said 'Unauthorized' as "$T" -n team get pods
check "kubesim's record lists the refusals" eval \
	"kcurl -s $KUBESIM_URL/kubesim/rbac | jq -e '.denied > 0 and any(.requests[]; .user == \"alice\" and .allowed == false)'"
