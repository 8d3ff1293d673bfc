#!/bin/bash
# kubesim's authentication.k8s.io/v1 TokenReview (tools/kubesim/review.c): the token is
# authenticated as a request bearing it would be — the admin's --token, the users of
# --token-auth-file, ServiceAccount tokens (TokenRequest) — else not authenticated; the
# review itself needs `create tokenreviews` (under --rbac); bad requests; --faults.
# (SubjectAccessReview is kubesim's RBAC authorizer: kubesim_rbac.sh.)
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
T=$(mktemp -d "${TMPDIR:-/tmp}/ksreview.XXXXXX") || exit 1
printf '%s\n' 'tok-alice,alice,u1,"system:masters,team-a"' 'tok-bob,bob,u2,viewers' >"$T/users.csv"
KUBESIM_NO_TRAP=1 KUBESIM_RBAC=1 kubesim_start --token-auth-file "$T/users.csv" ||
	{ echo "not ok - kubesim starts"; rm -rf "$T"; exit 1; }
trap 'kubesim_stop; rm -rf "$T"' EXIT
tr_of() { kraw POST /apis/authentication.k8s.io/v1/tokenreviews "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":{\"token\":\"$1\"}}"; }
is() { jq -e "$1" >/dev/null; }                 # jq test on stdin
code_of() { "$@" >/dev/null; kraw_code; }
t_file() { tr_of tok-alice | is '.status.authenticated and .status.user == {username: "alice", uid: "u1", groups: ["system:masters", "team-a", "system:authenticated"]}' && [ "$(kraw_code)" = 201 ]; }
t_admin() { tr_of "$KUBESIM_ADMIN_TOKEN" | is '.status.user.username == "kubesim-admin" and (.status.user.groups | index("system:masters"))'; }
t_sa() { local t; kraw POST /api/v1/namespaces/default/serviceaccounts '{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"scraper"}}' >/dev/null; t=$(kubesim_sa_token default scraper) && tr_of "$t" | is '.status.user.username == "system:serviceaccount:default:scraper"'; }
t_unknown() { tr_of nope | is '.status.authenticated == false and (.status.error | length > 0)'; }
t_empty() { tr_of "" | is '.status.authenticated == false'; }
t_notone() { [ "$(code_of kraw POST /apis/authentication.k8s.io/v1/tokenreviews '{"kind":"Pod"}')" = 400 ]; }
t_get() { [ "$(code_of kraw GET /apis/authentication.k8s.io/v1/tokenreviews)" = 405 ]; }
t_bob() { local r; r=$(KRAW_TOKEN=tok-bob code_of tr_of tok-alice); [ "$r" = 403 ]; }
t_fault() { [ "$(code_of tr_of tok-alice)" = 500 ]; }

check "TokenReview of a --token-auth-file token: alice, her groups and system:authenticated, 201" t_file
check "TokenReview of the admin's token: kubesim-admin in system:masters" t_admin
check "TokenReview of a ServiceAccount token (TokenRequest): system:serviceaccount:NS:NAME" t_sa
check "TokenReview of an unknown token: not authenticated, with an error" t_unknown
check "TokenReview of an empty token: not authenticated" t_empty
check "a TokenReview that is not one: 400" t_notone
check "GET of tokenreviews: 405" t_get
check "under --rbac, a user without create tokenreviews may not review (403)" t_bob
kraw PUT /kubesim/faults '{"rules":[{"verb":"create","resource":"tokenreviews","rate":1,"code":500}]}' >/dev/null
check "--faults apply to TokenReviews (500)" t_fault
