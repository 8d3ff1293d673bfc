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


ROW_KEYS = {"verbs", "scope", "names", "code", "grants"}


def table(path, checks=True):
    """API-CALL rows of one rbac file (format: deploy/rbac/controller-rbac.yaml):
    [{res, verbs, scopes, names, code}]; checks: print the row format checks."""
    global ok
    say, ok = ok, (ok if checks else (lambda *a, **k: None))
    try:
        return _table(path)
    finally:
        ok = say


def _table(path):
    rows = []
    for n, line in enumerate(open(path), 1):
        m = re.match(r"#\s*API-CALL\s+(\S+)\s+(.*?)\s*$", line)
        if not m:
            continue
        kv = dict(x.split("=", 1) for x in m.group(2).split() if "=" in x)
        bad = [x for x in m.group(2).split() if "=" not in x] + sorted(set(kv) - ROW_KEYS)
        # grants=FILE instead of code=: no call of ours needs it, FILE puts it into a role the
        # service creates (RBAC escalation prevention: it must hold what it grants)
        has_code = "code" in kv or "grants" in kv
        ok(not bad and {"verbs", "scope"} <= set(kv) and has_code,
           f"{path}:{n}: API-CALL row is RESOURCE verbs= scope= [names=] code=|grants=", line.strip())
        if bad or not {"verbs", "scope"} <= set(kv) or not has_code:
            continue
        row = {"res": m.group(1), "verbs": set(kv["verbs"].split(",")), "scopes": kv["scope"].split(","),
               "names": frozenset(x for x in kv.get("names", "").split(",") if x), "code": kv.get("code"),
               "grants": kv.get("grants"), "where": f"{path}:{n}"}
        ok(not (row["names"] and row["verbs"] & {"create", "list", "watch", "deletecollection"}),
           f"{row['where']}: names= never restricts create/list/watch/deletecollection (the rule could not match)")
        ok(all(re.fullmatch(r"cluster|operator-ns|ns:[a-z0-9-]+|opt-in:[a-z0-9.:-]+", x) for x in row["scopes"]),
           f"{row['where']}: scope is cluster, operator-ns, ns:NAME or opt-in:CLUSTERROLE", row["scopes"])
        rows.append(row)
    return rows


def split_res(res):
    """'apps/daemonsets' -> ('apps', 'daemonsets', ''); '/nodes' -> ('', 'nodes', ''); subresource third."""
    parts = res.split("/")
    return parts[0], parts[1], parts[2] if len(parts) > 2 else ""


def code_checks(rows):
    by_file = {}
    for row in rows:
        if row.get("grants"):
            try:
                gsrc = open(row["grants"]).read()
            except OSError as e:
                ok(False, f"table row {row['res']}: {row['grants']} exists", e)
                continue
            _, base, _ = split_res(row["res"])
            ok(base in gsrc, f"table row {row['res']} (granted): {row['grants']} puts {base} into a role")
            continue
        code = row["code"]
        try:
            src = open(code).read()
        except OSError as e:
            ok(False, f"table row {row['res']}: {code} exists", e)
            continue
        _, base, sub = split_res(row["res"])
        ok(f'"{base}"' in src or (sub == "finalizers"), f"table row {row['res']}: {code} names \"{base}\"")
        if sub == "finalizers":
            # not a call: the API server's admission (OwnerReferencesPermissionEnforcement)
            # wants update on the owner's finalizers for an ownerReference with blockOwnerDeletion
            ok(re.search(r"block_owner_deletion\s*=\s*1|\"blockOwnerDeletion\"\s*:\s*true", src) is not None,
               f"table row {row['res']}: {code} sets blockOwnerDeletion")
            continue
        if sub:
            ok(f'"{sub}"' in src, f"table row {row['res']}: {code} names the subresource \"{sub}\"")
        for v in sorted(row["verbs"]):
            ok(calls_verb(src, v), f"table row {row['res']} {v}: {code} calls {VERB_CALL[v]} (or its gk_kube_call_ form)")
        for name in sorted(row["names"]):
            d = os.path.dirname(code)
            where = "".join(open(f).read() for f in glob.glob(f"{d}/*.[ch]"))
            ok(f'"{name}"' in where, f"table row {row['res']} names={name}: {d}/ names \"{name}\"")
        by_file.setdefault(code, set()).update(row["verbs"])
        by_file.setdefault(code + "#res", set()).add(base)
    # the other way: every call and every resource in the code is in the table
    for path in sorted(glob.glob("services/*/*.c") + glob.glob("supervisor/*.c")):
        src = open(path).read()
        calls = {CALL_VERB[c] for c in CALL_VERB if c in src}
        if not calls:
            continue
        verbs = by_file.get(path, set())
        for c in sorted(calls):
            ok(c in verbs or (c == "list" and "list" in verbs), f"{path}: its {c} call is in the RBAC table",
               f"table verbs: {sorted(verbs)}")
        res = set(re.findall(r'\.resource\s*=\s*"([a-z.]+)"', src))
        res |= {m[2] for m in re.findall(r'\{\s*\w*,?\s*"([a-z0-9.]*)",\s*"(v1[a-z0-9]*)",\s*"([a-z]+)"', src)}
        for r in sorted(res):
            ok(r in by_file.get(path + "#res", set()), f"{path}: resource {r} is in the RBAC table")


def docs(d, variant):
    return [x for x in yaml.safe_load_all(open(f"{d}/{variant}.yaml")) if x]


def grants(rule, scope):
    """The atomic grants of one rule: (scope, group, resource, verb, names)."""
    names = frozenset(rule.get("resourceNames", []))
    return {(scope, g, r, v, names) for g in rule.get("apiGroups", []) for r in rule.get("resources", [])
            for v in rule["verbs"]}


def rendered_grants(objs, sa, op_ns, opt_in):
    """What the rendered manifests grant ServiceAccount op_ns/sa, per scope."""
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
             for o in objs if o["kind"] in ("Role", "ClusterRole")}
    out = set()
    for b in objs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        bns = b["metadata"].get("namespace")
        if not any(s.get("kind") == "ServiceAccount" and s["name"] == sa and s.get("namespace", bns) == op_ns
                   for s in b.get("subjects", [])):
            continue
        ref = b["roleRef"]
        role = roles.get((ref["kind"], bns if ref["kind"] == "Role" else None, ref["name"]))
        ok(role is not None, f"{b['kind']} {b['metadata']['name']} refers to an existing {ref['kind']}")
        scope = "cluster" if b["kind"] == "ClusterRoleBinding" else "operator-ns" if bns == op_ns else f"ns:{bns}"
        for r in (role or {}).get("rules", []):
            out |= grants(r, scope)
    for cr in opt_in:
        role = roles.get(("ClusterRole", None, cr))
        ok(role is not None, f"opt-in ClusterRole {cr} is shipped")
        for r in (role or {}).get("rules", []):
            out |= grants(r, f"opt-in:{cr}")
        bound = [b["metadata"]["name"] for b in objs if b["kind"] == "ClusterRoleBinding" and b["roleRef"]["name"] == cr]
        ok(not bound, f"opt-in ClusterRole {cr} is never bound cluster-wide", bound)
    return out


def table_grants(rows):
    out = set()
    for row in rows:
        g, r, sub = split_res(row["res"])
        for scope in row["scopes"]:
            for v in row["verbs"]:
                out.add((scope, g, f"{r}/{sub}" if sub else r, v, row["names"]))
    return out


def fmt(gs):
    return sorted(f"{s} {g}/{r} {v}{' names=' + ','.join(sorted(n)) if n else ''}" for s, g, r, v, n in gs)


def rbac_checks(objs):
    files = rbac_files()
    ok(sorted(sa for sa, _ in files) == ["gpukmm-controller", "gpukmm-node"] or len(files) > 2,
       "the controller's and the node's API-CALL tables are there", files)
    op_ns = next(o["metadata"]["name"] for o in objs if o["kind"] == "Namespace")
    all_rows = {sa: table(path) for sa, path in files}
    code_checks([r for rows in all_rows.values() for r in rows])
    for sa, path in files:
        rows = all_rows[sa]
        ok(len(rows) > 0, f"{path} has an API-CALL table")
        want = table_grants(rows)
        opt_in = sorted({s.split(":", 1)[1] for row in rows for s in row["scopes"] if s.startswith("opt-in:")})
        got = rendered_grants(objs, sa, op_ns, opt_in)
        ok(got == want, f"{sa}: the rendered RBAC grants exactly the API-CALL table (verbs, scopes, names)",
           f"granted, not in the table: {fmt(got - want)}; in the table, not granted: {fmt(want - got)}")
        wild = [x for x in got if "*" in x[1] or "*" in x[2] or x[3] == "*"]
        ok(not wild, f"{sa}: no wildcard rules", wild)


PROFILES = {"controller": {"watcher", "modmgr", "gater", "opmgr", "statusd", "certd", "webhook"},
            "node": {"prober", "statusd"}, "webhook": {"webhook"}}
CREDENTIALED = {"watcher", "modmgr", "gater", "opmgr", "statusd", "certd"}  # supervisor/conf.c: "credentials": true


def services_of(c):
    """The services a container runs: its gpukmm-NAME command, or its supervisor's profile minus --without
    (certd only with --webhook-cert-dir: supervisor/pflags.c)."""
    if c.get("command"):
        return {os.path.basename(c["command"][0]).removeprefix("gpukmm-")}
    args = c.get("args", [])
    prof = next((a.split("=", 1)[1] for a in args if a.startswith("--profile=")), "")
    svcs = set(PROFILES.get(prof, ()))
    for a in args:
        if a.startswith("--without="):
            svcs -= set(a.split("=", 1)[1].split(","))
    if not any(a.startswith("--webhook-cert-dir=") for a in args):
        svcs.discard("certd")
    return svcs


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
            # credentials only where a service needs them: the API token is mounted into a
            # container exactly when it runs a service that calls the API, and never where
            # the webhook (the network-facing parser) runs; its serving key only there
            svcs = services_of(c)
            mounts = {m["name"] for m in c.get("volumeMounts", [])}
            token = "api-token" in mounts
            need = bool(svcs & CREDENTIALED)
            ok(token == need, f"{cn} ({','.join(sorted(svcs))}): API token mounted {'here' if need else 'not here'}")
            ok(not ("webhook" in svcs and token), f"{cn}: the webhook never shares a container with the API token")
            # the serving pair: written by certd, read by the webhook, nowhere else
            cm = next((m for m in c.get("volumeMounts", []) if m["name"] == "webhook-certs"), None)
            ok((cm is not None) == bool(svcs & {"webhook", "certd"}),
               f"{cn}: the webhook's serving key only where the webhook or certd runs")
            ok(cm is None or (cm.get("readOnly") is True) == ("certd" not in svcs),
               f"{cn}: the serving key writable only where certd writes it")
        if o["kind"] == "Deployment":
            ok(o["spec"].get("replicas") == 2, f"{name}: 2 replicas")
            if variant == "sidecars":
                ok(all(c.get("restartPolicy") == "Always" for c in spec["initContainers"]),
                   f"{name}: init containers are native sidecars")
                ok(spec["initContainers"][0]["name"] == "watcher", f"{name}: watcher starts first")
            else:
                for c in spec["containers"]:
                    ok(c["livenessProbe"]["httpGet"]["path"] == "/healthz"
                       and c["readinessProbe"]["httpGet"]["path"] == "/readyz",
                       f"{name}/{c['name']}: /healthz and /readyz probes")
                    ok(any(a.startswith("--http-listen=") for a in c["args"]), f"{name}/{c['name']}: serves the probes")
                    ok(not any(a.startswith("--metrics-insecure") for a in c["args"]),
                       f"{name}/{c['name']}: no unauthenticated /metrics")
                # /metrics where a credentialed service can review the scrapers' tokens
                for c in spec["containers"]:
                    reviews = "statusd" in services_of(c)
                    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
                    ok(any(a.startswith("--metrics-listen=") for a in c["args"]) == reviews
                       and (ports.get("metrics") == 8443) == reviews,
                       f"{name}/{c['name']}: /metrics (HTTPS, port metrics 8443) {'served' if reviews else 'not served: no reviewer there'}",
                       ports)
                ran = sorted(x for c in spec["containers"] for x in services_of(c))
                ok(ran == sorted(PROFILES["controller"]), f"{name}: every controller service runs once", ran)
        else:
            ok(spec.get("serviceAccountName") == "gpukmm-node", f"{name}: its own ServiceAccount")
            ok(bool(spec.get("tolerations")), f"{name}: tolerations for GPU nodes")
            ran = sorted(x for c in spec["containers"] for x in services_of(c))
            ok(ran == sorted(PROFILES["node"]), f"{name}: every node service runs once", ran)
            rt = vols.get("report-token", {}).get("projected", {}).get("sources", [{}])[0].get("serviceAccountToken", {})
            ok(rt.get("audience") == "gpukmm.io/node-report",
               f"{name}: the report token is for the audience gpukmm.io/node-report (no API credential)", rt)
            for c in spec["containers"]:
                cn = f"{name}/{c['name']}"
                env = {e["name"]: e for e in c.get("env", [])}
                ok(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
                   == "spec.nodeName", f"{cn}: NODE_NAME from the downward API")
                ok("--profile=node" in c["args"], f"{cn}: runs --profile node")
                svcs = services_of(c)
                mounts = {m["name"] for m in c.get("volumeMounts", [])}
                paths = {vols[m["name"]]["hostPath"]["path"] for m in c["volumeMounts"]
                         if "hostPath" in vols.get(m["name"], {})}
                if "prober" in svcs:
                    ok(paths == {"/sys", "/lib/modules"}, f"{cn}: hostPath /sys and /lib/modules only", paths)
                else:
                    ok(not paths, f"{cn}: no host path where the prober does not run", paths)
                ok(("report-token" in mounts) == ("statusd" in svcs), f"{cn}: the report token only where statusd runs")
                ok(not ("prober" in svcs and mounts & {"api-token", "report-token"}),
                   f"{cn}: the prober (the parser of host input) never shares a container with a token")
                # /metrics of both, HTTPS, reviewed by the report container's statusd
                ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
                want = ("metrics", 8443) if "statusd" in svcs else ("prober-metrics", 8444)
                ok(any(a.startswith("--metrics-listen=") for a in c["args"]) and ports.get(want[0]) == want[1]
                   and "--metrics-insecure" not in c["args"], f"{cn}: /metrics over HTTPS, port {want[0]} {want[1]}", ports)
                if "statusd" not in svcs:
                    sock = next((a.split("=", 1)[1] for a in c["args"] if a.startswith("--metrics-reviewer=")), "")
                    env = {e["name"]: e.get("value") for e in c.get("env", [])}
                    ok(sock.startswith("ipc://") and env.get("GPUKMM_STATUSD") == sock,
                       f"{cn}: reports to and has tokens reviewed by the report container's statusd ({sock})")
                    ro = {m["name"]: m.get("readOnly") for m in c.get("volumeMounts", [])}
                    ok(ro.get("run") is True, f"{cn}: the report container's runtime directory mounted read-only")


def monitoring_checks(objs):
    """deploy/monitored: the Prometheus Operator objects of deploy/prometheus."""
    kinds = {}
    for o in objs:
        kinds.setdefault(o["kind"], []).append(o)
    svcs = {o["metadata"]["name"]: o for o in kinds.get("Service", [])}
    for comp in ("controller", "node"):
        sm = [o for o in kinds.get("ServiceMonitor", []) if o["metadata"]["name"] == f"gpukmm-{comp}"]
        ok(len(sm) == 1, f"monitored: ServiceMonitor gpukmm-{comp}")
        if not sm:
            continue
        ep = sm[0]["spec"]["endpoints"][0]
        ok(ep.get("scheme") == "https" and ep.get("bearerTokenFile"), f"monitored: gpukmm-{comp} scraped over "
           "HTTPS with the Prometheus ServiceAccount's token", ep)
        svc = svcs.get(f"gpukmm-{comp}-metrics")
        sel = sm[0]["spec"]["selector"]["matchLabels"]
        ok(svc is not None and all(svc["metadata"]["labels"].get(k) == v for k, v in sel.items())
           and any(p["name"] == ep["port"] and p["port"] == 8443 for p in svc["spec"]["ports"]),
           f"monitored: gpukmm-{comp}'s Service matches its ServiceMonitor (port {ep['port']} = 8443)")
    rules = kinds.get("PrometheusRule", [])
    ok(len(rules) == 1 and len(rules[0]["spec"]["groups"]) >= 2, "monitored: PrometheusRule gpukmm")
    cm = [o for o in kinds.get("ConfigMap", []) if o["metadata"]["name"] == "gpukmm-grafana-dashboard"]
    ok(len(cm) == 1 and cm[0]["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
       and json.loads(cm[0]["data"]["grafana-dashboard.json"])["panels"],
       "monitored: the Grafana dashboard as a ConfigMap for Grafana's sidecar")
    reader = [o for o in kinds.get("ClusterRole", []) if o["metadata"]["name"] == "gpukmm-metrics-reader"]
    ok(len(reader) == 1 and reader[0]["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
       "monitored: scrapers need only get on /metrics (gpukmm-metrics-reader)")
    b = [o for o in kinds.get("ClusterRoleBinding", []) if o["roleRef"]["name"] == "gpukmm-metrics-reader"]
    ok(len(b) == 1, "monitored: gpukmm-metrics-reader bound to the Prometheus ServiceAccount")


def config_checks():
    # the controller runs the default profiles, configured by flags only (no config file)
    objs = [o for o in yaml.safe_load_all(open("deploy/controller/deployment.yaml")) if o]
    ctrs = {c["name"]: c["args"] for c in objs[0]["spec"]["template"]["spec"]["containers"]}
    args, wargs = ctrs.get("gpukmm", []), ctrs.get("webhook", [])
    ok("--profile=controller" in args and "--without=webhook" in args and not any(a.startswith("--config") for a in args),
       "controller: --profile controller --without webhook, no config file", args)
    ok("--leader-elect" in args, "controller: the watcher elects a leader", args)
    cdir = [a for a in args if a.startswith("--webhook-cert-dir=")]
    ok("--profile=webhook" in wargs and cdir and cdir[0] in wargs,
       "controller: the webhook container serves the pair certd writes (the same --webhook-cert-dir)", wargs)
    ok(not any(a.startswith("--webhook-tls-") for a in args + wargs), "controller: no certificate files of its own",
       args + wargs)
    ok(not os.path.exists("deploy/controller/config.json"), "controller: no stale config.json")


def rbac_files():
    """(ServiceAccount, file) of every deploy/rbac file with an API-CALL table (its
    "# API-CALLS-OF NAME" line): a new service account's table is checked as soon
    as it exists."""
    out = []
    for path in sorted(glob.glob("deploy/rbac/*.yaml")):
        src = open(path).read()
        m = re.search(r"^#\s*API-CALLS-OF\s+(\S+)\s*$", src, re.M)
        if m:
            out.append((m.group(1), path))
        else:
            ok("# API-CALL " not in src, f"{path}: an API-CALL table names its ServiceAccount (API-CALLS-OF)")
    return out


def scope_has(scope, ns, op_ns):
    """Does a row's scope cover a request in namespace ns ("" = cluster-scoped)?"""
    if scope == "cluster":
        return True
    if scope == "operator-ns":
        return ns == op_ns
    if scope.startswith("ns:"):
        return ns == scope[3:]
    return bool(ns) and ns != op_ns  # opt-in: a namespace an admin bound it in


def exercised(record, op_ns):
    """kubesim's /kubesim/rbac record of a run: every request it allowed a
    ServiceAccount of ours is a row of that ServiceAccount's API-CALL table; the
    rows the run never used are listed (the static checks keep them honest)."""
    rec = json.load(open(record))
    ok(rec.get("rbac") is True, "the record comes from kubesim --rbac")
    for sa, path in rbac_files():
        rows = table(path, checks=False)
        user = f"system:serviceaccount:{op_ns}:{sa}"
        # (the self reviews are everyone's, system:basic-user: not our calls; a
        # TokenReview is: it needs its row)
        used = [r for r in rec.get("requests", []) if r["user"] == user and r["allowed"]
                and not r["resource"].startswith("/")
                and not (r["group"] in ("authorization.k8s.io", "authentication.k8s.io")
                         and r["resource"].startswith("selfsubject"))]
        ok(len(used) > 0, f"{sa}: its calls were seen (its token was used)")
        hit = set()
        for r in used:
            match = [(i, r["verb"]) for i, row in enumerate(rows)
                     if split_res(row["res"])[0] == r["group"]
                     and "/".join(x for x in split_res(row["res"])[1:] if x) == r["resource"]
                     and r["verb"] in row["verbs"] and any(scope_has(s, r["namespace"], op_ns) for s in row["scopes"])]
            where = f" in {r['namespace']}" if r["namespace"] else ""
            ok(bool(match), f"{sa}: {r['verb']} {r['group']}/{r['resource']}{where} ({r['count']}x) is an API-CALL row")
            hit.update(match)
        for i, row in enumerate(rows):
            for v in sorted(row["verbs"]):
                if (i, v) not in hit and not row["res"].endswith("/finalizers"):
                    print(f"# {sa}: not exercised by this run: {row['res']} {v} ({row['code']})")
    return 0


LABELS = ("name", "instance", "version", "component", "part-of", "managed-by")


def release():
    """deploy/version: the image (name:tag) and the labels every object carries."""
    c = yaml.safe_load(open("deploy/version/kustomization.yaml"))
    img = next(i for i in c["images"] if i["name"] == "gpukmm")
    return f"{img['newName']}:{img['newTag']}", img["newTag"], c["labels"][0]["pairs"]


def selects(sel, labels):
    return bool(sel) and all(labels.get(k) == v for k, v in sel.items())


def release_checks(variant, objs):
    """Issue #17: labels, images, availability and the webhook certificate of a rendered variant."""
    image, tag, pairs = release()
    ok(tag and tag != "latest" and pairs.get("app.kubernetes.io/version") == tag,
       f"{variant}: one release: the image tag is the version label, never latest", (tag, pairs))
    bad = []
    for o in objs:
        lab = o["metadata"].get("labels", {})
        miss = [k for k in LABELS if not lab.get(f"app.kubernetes.io/{k}")]
        if miss or lab.get("app.kubernetes.io/version") != tag or lab.get("app.kubernetes.io/part-of") != "gpukmm":
            bad.append(f"{o['kind']}/{o['metadata']['name']}: {miss or lab}")
        if o["kind"] in ("Deployment", "DaemonSet"):
            tl = o["spec"]["template"]["metadata"].get("labels", {})
            if [k for k in LABELS if not tl.get(f"app.kubernetes.io/{k}")]:
                bad.append(f"{o['kind']}/{o['metadata']['name']} pod template: {tl}")
    ok(not bad, f"{variant}: every object (and pod template) carries app.kubernetes.io/{{{','.join(LABELS)}}}", bad[:6])
    kinds = {}
    for o in objs:
        kinds.setdefault(o["kind"], []).append(o)
    for o in kinds.get("Deployment", []) + kinds.get("DaemonSet", []):
        spec = o["spec"]["template"]["spec"]
        ctrs = spec.get("initContainers", []) + spec["containers"]
        wrong = [(c["name"], c["image"], c.get("imagePullPolicy")) for c in ctrs
                 if c["image"] != image or c.get("imagePullPolicy") != "IfNotPresent"]
        ok(not wrong, f"{variant}: {o['kind']} {o['metadata']['name']}: every container runs {image}, IfNotPresent", wrong)
    dep = next((o for o in kinds.get("Deployment", []) if o["metadata"]["name"] == "gpukmm-controller"), None)
    if dep:
        spec = dep["spec"]["template"]["spec"]
        tl = dep["spec"]["template"]["metadata"]["labels"]
        ok(spec.get("priorityClassName") == "system-cluster-critical", f"{variant}: controller at priority system-cluster-critical")
        ru = dep["spec"].get("strategy", {}).get("rollingUpdate", {})
        ok(ru.get("maxUnavailable") == 0 and ru.get("maxSurge") == 1,
           f"{variant}: a rolling update starts the new controller before stopping an old one", ru)
        terms = spec.get("affinity", {}).get("podAntiAffinity", {}).get("preferredDuringSchedulingIgnoredDuringExecution", [])
        ok(any(t["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
               and selects(t["podAffinityTerm"]["labelSelector"]["matchLabels"], tl) for t in terms),
           f"{variant}: the controller replicas prefer different nodes (anti-affinity)")
        ok(any(t["topologyKey"] == "topology.kubernetes.io/zone" and selects(t["labelSelector"]["matchLabels"], tl)
               for t in spec.get("topologySpreadConstraints", [])), f"{variant}: and different zones")
        pdbs = [p for p in kinds.get("PodDisruptionBudget", []) if selects(p["spec"]["selector"]["matchLabels"], tl)]
        ok(len(pdbs) == 1 and (pdbs[0]["spec"].get("maxUnavailable") == 1 or pdbs[0]["spec"].get("minAvailable") == 1),
           f"{variant}: a PodDisruptionBudget keeps one controller replica (the webhook) up", pdbs)
    for o in kinds.get("DaemonSet", []):
        ok(o["spec"]["template"]["spec"].get("priorityClassName") == "system-node-critical",
           f"{variant}: DaemonSet {o['metadata']['name']} at priority system-node-critical")
    q = [x for x in kinds.get("ResourceQuota", []) for e in x["spec"].get("scopeSelector", {}).get("matchExpressions", [])
         if e["scopeName"] == "PriorityClass" and {"system-cluster-critical", "system-node-critical"} <= set(e["values"])]
    ok(len(q) == 1, f"{variant}: a ResourceQuota admits the critical priority classes in the operator namespace")
    # the webhook's certificate: certd's Secret, or cert-manager's
    sec = [o for o in kinds.get("Secret", []) if o["metadata"]["name"] == "gpukmm-webhook-cert"]
    confs = kinds.get("MutatingWebhookConfiguration", []) + kinds.get("ValidatingWebhookConfiguration", [])
    inj = [o["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from") for o in confs]
    if variant == "cert-manager":
        cert = [o for o in kinds.get("Certificate", []) if o["spec"]["secretName"] == "gpukmm-webhook-cert"]
        ok(not sec and len(cert) == 1, f"{variant}: the Secret comes from cert-manager's Certificate, none shipped")
        ok(len(confs) == 2 and inj == ["intel-gpu-base-operator/gpukmm-webhook-cert"] * 2,
           f"{variant}: both webhook configurations' caBundle injected by cert-manager", inj)
    else:
        ok(len(sec) == 1 and sec[0]["metadata"].get("annotations", {}).get("gpukmm.io/managed-by") == "gpukmm-certd"
           and not sec[0].get("data") and not sec[0].get("stringData"),
           f"{variant}: the certificate Secret shipped empty, owned by gpukmm-certd (no create right needed)")
        ok(len(confs) == 2 and inj == [None, None] and not any(w["clientConfig"].get("caBundle") for o in confs
                                                               for w in o["webhooks"]),
           f"{variant}: the webhook configurations ship without caBundle or injector (certd keeps it)", inj)


def main():
    if sys.argv[1] == "--exercised":
        exercised(sys.argv[2], sys.argv[3])
        return 1 if fails else 0
    d, variants = sys.argv[1], sys.argv[2:]
    for v in variants:
        try:
            objs = docs(d, v)
        except (OSError, yaml.YAMLError) as e:
            ok(False, f"{v}: rendered YAML parses", e)
            continue
        ok(any(o["kind"] == "CustomResourceDefinition" for o in objs), f"{v}: has the ClusterPolicy CRD")
        pod_checks(v, objs)
        release_checks(v, objs)
        if v == "default":
            rbac_checks(objs)
        if v == "monitored":
            monitoring_checks(objs)
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
