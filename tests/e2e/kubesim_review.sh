#!/bin/bash
# kubesim's authentication.k8s.io/v1 TokenReview and authorization.k8s.io/v1
# SubjectAccessReview (tools/kubesim/review.c): the identities of --token-auth-file
# and of --token, the simple authorization rule (system:masters only, until kubesim
# enforces RBAC), bad requests, and --faults on reviews.
set -u
cd "${GPUKMM_SRC:-.}" || exit 1
. tests/lib/kubesim.sh
T=$(mktemp -d "${TMPDIR:-/tmp}/ksreview.XXXXXX") || exit 1
printf '%s\n' '# token,user,uid,"groups"' 'tok-admin,alice,u1,"system:masters,team-a"' 'tok-view,bob,u2,viewers' \
	'tok-nogroup,carol,u3' >"$T/users.csv"
KUBESIM_NO_TRAP=1 kubesim_start --token admin-token --token-auth-file "$T/users.csv" ||
	{ echo "not ok - kubesim starts"; rm -rf "$T"; exit 1; }
trap 'kubesim_stop; rm -rf "$T"' EXIT
KRAW_FLAGS="--oauth2-bearer admin-token"
tr_of() { kraw POST /apis/authentication.k8s.io/v1/tokenreviews "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":{\"token\":\"$1\"}}"; }
sar() { kraw POST /apis/authorization.k8s.io/v1/subjectaccessreviews "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\",\"spec\":$1}"; }

is() { jq -e "$1" >/dev/null; }                 # jq test on stdin
code_of() { "$@" >/dev/null; kraw_code; }
t_file() { tr_of tok-admin | is '.status.authenticated and .status.user == {username: "alice", uid: "u1", groups: ["system:masters", "team-a", "system:authenticated"]}' && [ "$(kraw_code)" = 201 ]; }
t_admin() { tr_of admin-token | is '.status.user.username == "kubesim-admin" and (.status.user.groups | index("system:masters"))'; }
t_unknown() { tr_of nope | is '.status.authenticated == false and (.status.error | length > 0)'; }
t_nogroup() { tr_of tok-nogroup | is '.status.user.groups == ["system:authenticated"]'; }
s_masters() { sar '{"user":"alice","groups":["system:masters"],"nonResourceAttributes":{"path":"/metrics","verb":"get"}}' | is '.status.allowed == true'; }
s_other() { sar '{"user":"bob","groups":["viewers"],"resourceAttributes":{"verb":"list","resource":"nodes"}}' | is '.status.allowed == false and (.status.reason | test("bob"))'; }
s_nouser() { [ "$(code_of sar '{"nonResourceAttributes":{"path":"/metrics","verb":"get"}}')" = 400 ]; }
s_both() { [ "$(code_of sar '{"user":"a","nonResourceAttributes":{},"resourceAttributes":{}}')" = 400 ]; }
t_notone() { [ "$(code_of kraw POST /apis/authentication.k8s.io/v1/tokenreviews '{"kind":"Pod"}')" = 400 ]; }
t_get() { [ "$(code_of kraw GET /apis/authentication.k8s.io/v1/tokenreviews)" = 405 ]; }
t_noauth() { local f=$KRAW_FLAGS r; KRAW_FLAGS=; r=$(code_of tr_of tok-admin); KRAW_FLAGS=$f; [ "$r" = 401 ]; }
s_fault() { [ "$(code_of sar '{"user":"alice","nonResourceAttributes":{"path":"/metrics","verb":"get"}}')" = 503 ]; }

check "TokenReview of a file token: alice, her groups and system:authenticated, 201" t_file
check "TokenReview of --token: kubesim-admin in system:masters" t_admin
check "TokenReview of an unknown token: not authenticated, with an error" t_unknown
check "a user without groups in the file is still authenticated" t_nogroup
check "SubjectAccessReview: system:masters may get /metrics" s_masters
check "SubjectAccessReview: anyone else may not, and the reason says why" s_other
check "SubjectAccessReview without user and groups: 400" s_nouser
check "SubjectAccessReview with both attribute kinds: 400" s_both
check "a TokenReview that is not one: 400" t_notone
check "GET of tokenreviews: 405" t_get
check "reviews need the API's own authentication (no token: 401)" t_noauth
kraw PUT /kubesim/faults '{"rules":[{"verb":"create","resource":"subjectaccessreviews","rate":1,"code":503}]}' >/dev/null
check "--faults apply to reviews (503)" s_fault
printf 'only-a-token\n' >"$T/bad.csv"
check "a malformed --token-auth-file is refused at start" bash -c "! timeout 10 '$KUBESIM_BIN' --listen 127.0.0.1:0 --token-auth-file '$T/bad.csv' >/dev/null 2>&1"
