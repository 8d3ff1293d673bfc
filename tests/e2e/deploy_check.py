#!/usr/bin/env python3
"""Checks of the rendered deploy/ variants (called by deploy_manifests.sh).

argv: DIR VARIANT... ; DIR/VARIANT.yaml is `kubectl kustomize deploy/VARIANT`.
Prints TAP-ish ok / not ok lines. Run from the repository root.
"""
import glob
import json
import os
import re
import sys

import yaml

# blocking (gk_kube_get) or async (gk_kube_call_get, lib/kube/async.c) form of each verb
VERB_CALL = {"get": "gk_kube_get(", "list": "gk_kube_watch_start(", "watch": "gk_kube_watch_start(",
             "create": "gk_kube_create(", "update": "gk_kube_update(", "patch": "gk_kube_patch(",
             "delete": "gk_kube_delete("}
CALL_VERB = {"gk_kube_get(": "get", "gk_kube_watch_start(": "watch", "gk_kube_create(": "create",
             "gk_kube_update(": "update", "gk_kube_patch(": "patch", "gk_kube_delete(": "delete",
             "gk_kube_list(": "list"}
CALL_VERB.update({c.replace("gk_kube_", "gk_kube_call_"): v for c, v in list(CALL_VERB.items())
                  if c != "gk_kube_watch_start("})


def calls_verb(src, v):
    """Does src call verb v in either form?"""
    c = VERB_CALL[v]
    return c in src or c.replace("gk_kube_", "gk_kube_call_") in src


fails = 0


def ok(cond, name, why=""):
    global fails
    print(("ok - " if cond else "not ok - ") + name)
    if not cond:
        fails += 1
        if why:
            print("#   " + str(why))


def table(path):
    """API-CALL rows of one rbac file: [(group/resource, {verbs}, code)]."""
    rows = []
    for line in open(path):
        m = re.match(r"#\s*API-CALL\s+(\S+)\s+(\S+)\s+(\S+)\s*$", line)
        if m and m.group(1) != "group/resource":
            rows.append((m.group(1), set(m.group(2).split(",")), m.group(3)))
    return rows


def code_checks(rows):
    by_file = {}
    for res, verbs, code in rows:
        if code.startswith("pending:"):
            print(f"# {res} {','.join(sorted(verbs))}: {code} (not merged yet, not checked)")
            continue
        try:
            src = open(code).read()
        except OSError as e:
            ok(False, f"table row {res}: {code} exists", e)
            continue
        base = res.split("/")[1]
        ok(f'"{base}"' in src, f"table row {res}: {code} names \"{base}\"")
        for v in sorted(verbs):
            ok(calls_verb(src, v), f"table row {res} {v}: {code} calls {VERB_CALL[v]} (or its gk_kube_call_ form)")
        by_file.setdefault(code, set()).update(verbs)
        by_file.setdefault(code + "#res", set()).add(base)
    # the other way: every call and every resource in the code is in the table
    for path in sorted(glob.glob("services/*/*.c") + glob.glob("supervisor/*.c")):
        src = open(path).read()
        calls = {CALL_VERB[c] for c in CALL_VERB if c in src}
        if not calls:
            continue
        verbs = by_file.get(path, set())
        for c in sorted(calls):
            ok(c in verbs, f"{path}: its {c} call is in the RBAC table", f"table verbs: {sorted(verbs)}")
        res = set(re.findall(r'\.resource\s*=\s*"([a-z.]+)"', src))
        res |= {m[2] for m in re.findall(r'\{\s*\w*,?\s*"([a-z0-9.]*)",\s*"(v1[a-z0-9]*)",\s*"([a-z]+)"', src)}
        for r in sorted(res):
            ok(r in by_file.get(path + "#res", set()), f"{path}: resource {r} is in the RBAC table")


def docs(d, variant):
    return [x for x in yaml.safe_load_all(open(f"{d}/{variant}.yaml")) if x]


def rules_for(objs, sa):
    """(group/resource) -> verbs granted to ServiceAccount sa by the bindings in objs."""
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
             for o in objs if o["kind"] in ("Role", "ClusterRole")}
    out = {}
    for b in objs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s["name"] == sa for s in b["subjects"]):
            continue
        ref = b["roleRef"]
        ns = b["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], ns, ref["name"]))
        ok(role is not None, f"{b['kind']} {b['metadata']['name']} refers to an existing {ref['kind']}")
        for r in (role or {}).get("rules", []):
            for g in r.get("apiGroups", []):
                for res in r.get("resources", []):
                    out.setdefault(f"{g}/{res}", set()).update(r["verbs"])
    return out


def rbac_checks(objs):
    files = (("gpukmm-controller", "deploy/rbac/controller-rbac.yaml"),
             ("gpukmm-node", "deploy/rbac/node-rbac.yaml"))
    code_checks([r for _, path in files for r in table(path)])
    for sa, path in files:
        rows = table(path)
        ok(len(rows) > 0, f"{path} has an API-CALL table")
        want = {}
        for res, verbs, _ in rows:
            want.setdefault(res, set()).update(verbs)
        got = rules_for(objs, sa)
        ok(got == want, f"{sa}: rendered RBAC rules == the API-CALL table",
           f"rendered {sorted((k, sorted(v)) for k, v in got.items())}")
        wild = [k for k, v in got.items() if "*" in k or "*" in v]
        ok(not wild, f"{sa}: no wildcard rules", wild)


def pod_checks(variant, objs):
    for o in objs:
        if o["kind"] not in ("Deployment", "DaemonSet"):
            continue
        name = f"{variant}: {o['kind']} {o['metadata']['name']}"
        spec = o["spec"]["template"]["spec"]
        psc = spec.get("securityContext", {})
        ok(spec.get("automountServiceAccountToken") is False, f"{name}: no automounted token")
        ok(psc.get("runAsNonRoot") is True, f"{name}: runAsNonRoot")
        ok(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{name}: seccomp RuntimeDefault")
        ctrs = spec.get("initContainers", []) + spec["containers"]
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        for c in ctrs:
            cn = f"{name}/{c['name']}"
            sc = c.get("securityContext", {})
            ok(sc.get("readOnlyRootFilesystem") is True, f"{cn}: readOnlyRootFilesystem")
            ok(sc.get("allowPrivilegeEscalation") is False, f"{cn}: no privilege escalation")
            ok(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{cn}: drops ALL capabilities")
            ok("requests" in c.get("resources", {}) and "memory" in c["resources"].get("limits", {}),
               f"{cn}: resource requests and a memory limit")
            for m in c.get("volumeMounts", []):
                if "hostPath" in vols.get(m["name"], {}):
                    ok(m.get("readOnly") is True, f"{cn}: hostPath {m['mountPath']} read-only")
            env = {e["name"]: e for e in c.get("env", [])}
            ok(env.get("OPERATOR_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {})
               .get("fieldPath") == "metadata.namespace", f"{cn}: OPERATOR_NAMESPACE from the downward API")
            token = any(m["name"] == "api-token" for m in c.get("volumeMounts", []))
            if variant == "sidecars" and o["kind"] == "Deployment":
                want = c["name"] in ("watcher", "modmgr", "gater", "opmgr", "statusd")
                ok(token == want, f"{cn}: API token mounted {'only here' if want else 'not here'}")
        if o["kind"] == "Deployment":
            ok(o["spec"].get("replicas") == 2, f"{name}: 2 replicas")
            if variant == "sidecars":
                ok(all(c.get("restartPolicy") == "Always" for c in spec["initContainers"]),
                   f"{name}: init containers are native sidecars")
                ok(spec["initContainers"][0]["name"] == "watcher", f"{name}: watcher starts first")
            else:
                c = spec["containers"][0]
                ok(c["livenessProbe"]["httpGet"]["path"] == "/healthz"
                   and c["readinessProbe"]["httpGet"]["path"] == "/readyz", f"{name}: /healthz and /readyz probes")
                ok(any(a.startswith("--http-listen=") for a in c["args"]), f"{name}: serves /metrics")
        else:
            c = spec["containers"][0]
            env = {e["name"]: e for e in c.get("env", [])}
            ok(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
               == "spec.nodeName", f"{name}: NODE_NAME from the downward API")
            ok("--profile=node" in c["args"], f"{name}: runs --profile node")
            ok(spec.get("serviceAccountName") == "gpukmm-node", f"{name}: its own ServiceAccount")
            paths = {vols[m["name"]]["hostPath"]["path"] for m in c["volumeMounts"]
                     if "hostPath" in vols.get(m["name"], {})}
            ok(paths == {"/sys", "/lib/modules"}, f"{name}: hostPath /sys and /lib/modules only", paths)
            ok(bool(spec.get("tolerations")), f"{name}: tolerations for GPU nodes")


def config_checks():
    # the controller runs the default profile, configured by flags only (no config file)
    objs = [o for o in yaml.safe_load_all(open("deploy/controller/deployment.yaml")) if o]
    args = objs[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    ok("--profile=controller" in args and not any(a.startswith("--config") for a in args),
       "controller: --profile controller, no config file", args)
    ok("--leader-elect" in args, "controller: the watcher elects a leader", args)
    ok(any(a.startswith("--webhook-tls-cert=") for a in args)
       and any(a.startswith("--webhook-tls-key=") for a in args), "controller: webhook TLS files", args)
    ok(not os.path.exists("deploy/controller/config.json"), "controller: no stale config.json")


def main():
    d, variants = sys.argv[1], sys.argv[2:]
    for v in variants:
        try:
            objs = docs(d, v)
        except (OSError, yaml.YAMLError) as e:
            ok(False, f"{v}: rendered YAML parses", e)
            continue
        ok(any(o["kind"] == "CustomResourceDefinition" for o in objs), f"{v}: has the ClusterPolicy CRD")
        pod_checks(v, objs)
        if v == "default":
            rbac_checks(objs)
        if v == "openshift":
            scc = {o["metadata"]["name"]: o for o in objs if o["kind"] == "SecurityContextConstraints"}
            ml = scc.get("gpukmm-module-loader-scc", {})
            ok(ml.get("allowedCapabilities") == ["SYS_MODULE"], "openshift: module-loader SCC allows SYS_MODULE only")
            node = scc.get("gpukmm-node-scc", {})
            ok(node.get("allowHostDirVolumePlugin") is True and node.get("allowPrivilegedContainer") is False
               and node.get("requiredDropCapabilities") == ["ALL"] and node.get("runAsUser", {}).get("type") == "MustRunAsNonRoot",
               "openshift: the node DaemonSet's SCC allows hostPath, nothing privileged, non-root")
            nb = [o for o in objs if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == "gpukmm-node-scc-binding"]
            ok(len(nb) == 1 and nb[0]["subjects"][0]["name"] == "gpukmm-node", "openshift: node SCC bound to gpukmm-node")
            ctl = [o for o in objs if o["kind"] == "Deployment"][0]["spec"]["template"]["spec"]["securityContext"]
            ok("runAsUser" not in ctl and "runAsGroup" not in ctl and ctl.get("runAsNonRoot") is True,
               "openshift: controller pods fit restricted-v2 (no pinned UID, runAsNonRoot)")
            b = [o for o in objs if o["kind"] == "ClusterRoleBinding"
                 and o["metadata"]["name"] == "gpukmm-module-loader-scc-binding"]
            ok(len(b) == 1 and b[0]["subjects"][0]["name"] == "module-loader",
               "openshift: SCC bound to the module-loader ServiceAccount")
    config_checks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
