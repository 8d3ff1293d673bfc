#!/usr/bin/env python3
"""AdmissionReviews for the webhook's limits (tests/e2e/webhook_limits.sh, tests/bench/webhook.sh).

Usage: webhook_reviews.py DIR NAME...   writes DIR/NAME.json for each NAME of
  array        a 2.9 MB review whose object holds a 1.45M-element array
  deep         an object nested 70 levels deep
  mappings40k  40,000 kernelMappings (more JSON values than the webhook parses)
  mappings30k  30,000 kernelMappings (fewer: parsed, refused by the maxItems rule)
  legal        the largest review the CRD admits: every list at its maxItems, regexps and
               image references near their maxLength, as object and oldObject (UPDATE)
The limits are read from deploy/crd/intel.com_clusterpolicies.yaml (run from the source tree).
"""
import json
import sys

import yaml

t, names = sys.argv[1], set(sys.argv[2:])


def review(obj, old=None, op="CREATE"):
    req = {"uid": "review-uid", "kind": {"group": "intel.com", "version": "v1alpha1", "kind": "ClusterPolicy"},
           "operation": op, "object": obj}
    if old is not None:
        req["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def cp(spec, name="gpu"):
    return {"apiVersion": "intel.com/v1alpha1", "kind": "ClusterPolicy", "metadata": {"name": name}, "spec": spec}


def write(name, j):
    if name in names:
        with open(f"{t}/{name}.json", "w") as f:
            json.dump(j, f, separators=(",", ":"))


write("array", review(cp({"resourceRegistration": "dp", "x": [0] * 1450000})))
deep = 0
for _ in range(70):
    deep = [deep]
write("deep", review(cp({"resourceRegistration": "dp", "x": deep})))
for n in (40000, 30000):
    if "mappings%dk" % (n // 1000) in names:
        maps = [{"regexp": "^6\\.%d$" % i, "containerImage": "r.io/xe:%d" % i} for i in range(n)]
        write("mappings%dk" % (n // 1000), review(cp({"resourceRegistration": "dp", "kernelModule": {"kernelMappings": maps}})))
if "legal" in names:
    # the largest legal policy: limits as the CRD says (read from it, so the bench follows the CRD)
    crd = yaml.safe_load(open("deploy/crd/intel.com_clusterpolicies.yaml"))
    sp = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    km = sp["kernelModule"]["properties"]
    mp = km["kernelMappings"]["items"]["properties"]
    eq = sp["kueue"]["properties"]["equalResources"]
    L = {"maps": km["kernelMappings"].get("maxItems"), "args": mp["build"]["properties"]["buildArgs"].get("maxItems"),
         "secrets": mp["build"]["properties"]["secrets"].get("maxItems"), "intree": mp["inTreeModulesToRemove"].get("maxItems"),
         "order": km["modulesLoadingOrder"].get("maxItems"), "ids": sp["dp"]["properties"]["allowIDs"].get("maxItems"),
         "tol": sp["tolerations"].get("maxItems"), "eq": eq.get("maxItems"),
         "lq": eq["items"]["properties"]["localQueues"].get("maxItems"), "rx": mp["regexp"].get("maxLength"),
         "img": mp["containerImage"].get("maxLength"), "sel": sp["nodeSelector"].get("maxProperties")}
    if None in L.values():
        # a CRD without limits (the code before them): the sizes of the worst case measured after
        dflt = {"maps": 128, "args": 32, "secrets": 16, "intree": 16, "order": 16, "ids": 256, "tol": 64,
                "eq": 32, "lq": 64, "rx": 1024, "img": 1024, "sel": 64}
        L = {k: (v if v is not None else dflt[k]) for k, v in L.items()}
    # the longest image reference and regexp that are still valid, below their maxLength
    img = "registry.example.com/" + "a" * (255 - len("registry.example.com/")) + ":${KERNEL_FULL_VERSION}"
    img = img[: L["img"]]
    alts, rx = [], ""
    while True:
        cand = "^(" + "|".join(alts + ["6\\.%d\\.[0-9]+-[0-9]+-generic" % len(alts)]) + ")$"
        if len(cand) > L["rx"]:
            break
        alts.append("6\\.%d\\.[0-9]+-[0-9]+-generic" % len(alts))
        rx = cand
    mapping = {"regexp": rx, "containerImage": img,
               "build": {"dockerfileConfigMap": {"name": "df"},
                         "buildArgs": [{"name": "A%d" % i, "value": "v" * 64} for i in range(L["args"])],
                         "secrets": [{"name": "s%d" % i} for i in range(L["secrets"])]},
               "inTreeModulesToRemove": ["m%d" % i for i in range(L["intree"])], "registryTLS": {"insecure": True}}
    spec = {"resourceRegistration": "dp",
            "dp": {"plugin": "intel/plugin:1.0", "allowIDs": ["0x%04x" % i for i in range(L["ids"])]},
            "nodeSelector": {"k%d" % i: "v" for i in range(L["sel"])},
            "tolerations": [{"key": "k%d" % i, "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 3}
                            for i in range(L["tol"])],
            "kueue": {"equalResources": [{"name": "q%d" % i, "localQueues": [{"name": "l%d" % j, "namespace": "n%d-%d" % (i, j)}
                                                                             for j in range(L["lq"])]} for i in range(L["eq"])]},
            "kernelModule": {"moduleName": "xe", "kernelMappings": [mapping] * L["maps"],
                             "modulesLoadingOrder": ["xe"] + ["m%d" % i for i in range(L["order"] - 1)]}}
    write("legal", review(cp(spec), cp(spec), "UPDATE"))
    print("# limits: " + ", ".join("%s %d" % kv for kv in sorted(L.items())))
