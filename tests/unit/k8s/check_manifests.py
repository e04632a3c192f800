#!/usr/bin/python3
"""Renders the kustomize bases with kubectl (offline) and checks what a cluster would receive.

No API server can run on the build machines, so this checks the rendered objects against the
published contracts: kinds and names, namespaces, the control-plane placement, ports, the
KubeSchedulerConfiguration's extender, least-privilege RBAC, the shim injection, CURVE on by
default with its Secret and the NetworkPolicy (k8s/overlays/plain without CURVE), and the
HTTPS overlays (k8s/overlays/extender-tls, extender-mtls) against kube-scheduler's v1 Extender and
ExtenderTLSConfig fields and the Secrets they mount (k8s/examples/extender-tls-cert-manager.yaml).
Prints one line per check and "N passed, M failed". Usage: check_manifests.py REPO_ROOT
"""
import subprocess
import sys

import yaml

root = sys.argv[1]
results = []


def check(ok, what, detail=""):
    results.append(bool(ok))
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail and not ok else ''}")


def render(path, *extra):
    p = subprocess.run(["kubectl", "kustomize", f"{root}/{path}", *extra], capture_output=True, text=True)
    check(p.returncode == 0, f"kubectl kustomize {path} renders", p.stderr.strip())
    return [d for d in yaml.safe_load_all(p.stdout) if d] if p.returncode == 0 else []


def find(objs, kind, name):
    return next((o for o in objs if o["kind"] == kind and o["metadata"]["name"].startswith(name)), None)


base = render("k8s/base")
for kind, name in [("Namespace", "metronome-system"),
                   ("CustomResourceDefinition", "trafficprofiles.metronome.dev"),
                   ("CustomResourceDefinition", "linkschedules.metronome.dev"),
                   ("ServiceAccount", "metronome-scheduler"), ("ClusterRole", "metronome-scheduler"),
                   ("ClusterRoleBinding", "metronome-scheduler"), ("Deployment", "metronome-scheduler"),
                   ("Service", "metronome-scheduler"), ("ConfigMap", "metronome-config"),
                   ("Deployment", "metronome-kube-scheduler"),
                   ("ConfigMap", "metronome-kube-scheduler-config")]:
    check(find(base, kind, name) is not None, f"base has {kind} {name}")

for o in base:
    if o["kind"] not in ("Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"):
        ns = o["metadata"].get("namespace")
        expected = "kube-system" if o["metadata"]["name"].endswith("auth-reader") else "metronome-system"
        check(ns == expected, f"{o['kind']} {o['metadata']['name']} in namespace {expected}", ns)

dep = find(base, "Deployment", "metronome-scheduler")
# Only the leader is ever Ready: a rolling update that keeps a replica available cannot replace
# it (the new pod waits for the old leader's lease: the rollout stalls), and a disruption budget
# that keeps one available blocks every drain of the leader's node.
check(find(base, "PodDisruptionBudget", "") is None, "no disruption budget over leader-only readiness")
if dep:
    check(dep["spec"].get("strategy", {}).get("type") == "Recreate",
          "the scheduler is replaced by Recreate (Ready is leading)", dep["spec"].get("strategy"))
    pod = dep["spec"]["template"]["spec"]
    check(pod.get("nodeSelector", {}).get("node-role.kubernetes.io/control-plane") == "",
          "scheduler runs on the control-plane node (nodeSelector)")
    check(any(t.get("key") == "node-role.kubernetes.io/control-plane" for t in pod.get("tolerations", [])),
          "scheduler tolerates the control-plane taint")
    c = pod["containers"][0]
    check({p["containerPort"] for p in c["ports"]} == {7411, 7412}, "scheduler exposes ZeroMQ 7411 and HTTP 7412")
    check(c["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness probe on /readyz (the leader)")
    check(c["livenessProbe"]["httpGet"]["path"] == "/healthz", "liveness probe on /healthz")
    check(dep["spec"]["replicas"] == 2 and "--leader-elect" in c["args"],
          "two replicas with leader election")
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c.get("env", [])}
    check(env.get("POD_NAME") == "metadata.name" and env.get("POD_NAMESPACE") == "metadata.namespace",
          "POD_NAME and POD_NAMESPACE from the downward API (the Lease's holder and namespace)")
    role = find(base, "Role", "metronome-scheduler-leader-election")
    lease_verbs = {v for r in (role or {}).get("rules", []) if "leases" in r["resources"] for v in r["verbs"]}
    check({"get", "create", "patch"} <= lease_verbs, "the scheduler may get, create and patch its Lease")
    binding = find(base, "RoleBinding", "metronome-scheduler-leader-election")
    check(binding is not None and binding["subjects"][0]["name"] == pod["serviceAccountName"],
          "the lease role is bound to the scheduler's service account")
    cm_name = next(v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v)
    check(find(base, "ConfigMap", cm_name) is not None, "scheduler mounts the generated config map", cm_name)
    cm = find(base, "ConfigMap", "metronome-config")
    topo = yaml.safe_load(cm["data"]["topology.yaml"]) if cm else {}
    check(topo.get("topology", {}).get("racks"), "topology config map holds racks")

svc = find(base, "Service", "metronome-scheduler")
if svc:
    check({p["port"] for p in svc["spec"]["ports"]} == {7411, 7412}, "service ports 7411 and 7412")

ksc_cm = find(base, "ConfigMap", "metronome-kube-scheduler-config")
if ksc_cm:
    ksc = yaml.safe_load(ksc_cm["data"]["kube-scheduler-config.yaml"])
    check(ksc["apiVersion"] == "kubescheduler.config.k8s.io/v1" and ksc["kind"] == "KubeSchedulerConfiguration",
          "KubeSchedulerConfiguration v1")
    check([p["schedulerName"] for p in ksc["profiles"]] == ["metronome"], "one profile named metronome")
    ext = ksc["extenders"][0]
    check(ext["urlPrefix"].endswith("/extender") and ":7412" in ext["urlPrefix"], "extender urlPrefix ends in /extender on the HTTP port")
    check(ext["filterVerb"] == "filter" and ext["prioritizeVerb"] == "prioritize", "filter and prioritize verbs")
    check(ext["ignorable"] is True, "extender is ignorable (scheduling goes on without it)")
    t = ext["httpTimeout"]
    ms = float(t[:-2]) if t.endswith("ms") else float(t[:-1]) * 1000
    check(0 < ms <= 1000, "extender httpTimeout is short", t)
    check(1 <= ext["weight"] <= 100, "extender weight in range")
    kdep = find(base, "Deployment", "metronome-kube-scheduler")
    mounted = next(v["configMap"]["name"] for v in kdep["spec"]["template"]["spec"]["volumes"])
    check(mounted == ksc_cm["metadata"]["name"], "second kube-scheduler mounts its configuration")

# kube-scheduler's published v1 Extender and ExtenderTLSConfig fields (kubescheduler.config.k8s.io/v1).
EXTENDER_FIELDS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
                   "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
                   "ignorable"}
TLS_FIELDS = {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"}
TLS_ONLY = {"urlPrefix", "enableHTTPS", "tlsConfig"}


def extender_of(objs):
    cm = find(objs, "ConfigMap", "metronome-kube-scheduler-config")
    return yaml.safe_load(cm["data"]["kube-scheduler-config.yaml"])["extenders"][0] if cm else {}


def pod_of(objs, name):
    d = find(objs, "Deployment", name)
    return d["spec"]["template"]["spec"] if d else {"containers": [{}], "volumes": []}


def secret_file(pod, path):
    """(Secret name, key) behind a file path in the pod's first container, or None."""
    c = pod["containers"][0]
    for m in c.get("volumeMounts", []):
        prefix = m["mountPath"].rstrip("/") + "/"
        if not path.startswith(prefix):
            continue
        vol = next((v for v in pod["volumes"] if v["name"] == m["name"]), {})
        if "secret" not in vol:
            return None
        key = path[len(prefix):]
        items = vol["secret"].get("items")
        if items is not None:
            key = next((i["key"] for i in items if i["path"] == key), None)
        return (vol["secret"]["secretName"], key) if key else None
    return None


def arg(container, flag):
    return next((a.split("=", 1)[1] for a in container.get("args", []) if a.startswith(flag + "=")), None)


base_ext = extender_of(base)
check(set(base_ext) <= EXTENDER_FIELDS, "base extender uses only v1 Extender fields", set(base_ext) - EXTENDER_FIELDS)
check(base_ext.get("urlPrefix", "").startswith("http://") and base_ext.get("enableHTTPS") is False,
      "plain HTTP stays the default")
certs = {d["spec"]["secretName"]: d["spec"] for d in
         yaml.safe_load_all(open(f"{root}/k8s/examples/extender-tls-cert-manager.yaml"))
         if d and d["kind"] == "Certificate"}

for overlay, mutual in [("extender-tls", False), ("extender-mtls", True)]:
    objs = render(f"k8s/overlays/{overlay}")
    if not objs:
        continue
    ext = extender_of(objs)
    tls = ext.get("tlsConfig") or {}
    check(set(ext) <= EXTENDER_FIELDS and set(tls) <= TLS_FIELDS,
          f"{overlay}: extender uses only v1 Extender/ExtenderTLSConfig fields",
          (set(ext) - EXTENDER_FIELDS) | (set(tls) - TLS_FIELDS))
    check({k: v for k, v in ext.items() if k not in TLS_ONLY} == {k: v for k, v in base_ext.items() if k not in TLS_ONLY},
          f"{overlay}: extender entry equals the base's apart from HTTPS")
    check(ext.get("enableHTTPS") is True and ext.get("urlPrefix") == "https://" + base_ext["urlPrefix"][len("http://"):],
          f"{overlay}: enableHTTPS and the same urlPrefix over https://", ext.get("urlPrefix"))
    # With enableHTTPS and no CA, kube-scheduler skips verifying the server: a CA must be given.
    check(tls.get("caFile") and not tls.get("insecure"), f"{overlay}: server verified with a CA file")
    kpod = pod_of(objs, "metronome-kube-scheduler")
    spod = pod_of(objs, "metronome-scheduler")
    check(secret_file(kpod, tls.get("caFile", "")) == ("metronome-extender-tls", "ca.crt"),
          f"{overlay}: kube-scheduler mounts ca.crt of Secret metronome-extender-tls at caFile")
    check(all([i["key"] for i in v["secret"].get("items", [{"key": "*"}])] == ["ca.crt"] for v in kpod["volumes"]
              if v.get("secret", {}).get("secretName") == "metronome-extender-tls"),
          f"{overlay}: kube-scheduler gets only the CA of the server's Secret, not its key")
    sc = spod["containers"][0]
    cert, key = arg(sc, "--http-tls-cert-file"), arg(sc, "--http-tls-key-file")
    check(secret_file(spod, cert or "") == ("metronome-extender-tls", "tls.crt") and
          secret_file(spod, key or "") == ("metronome-extender-tls", "tls.key"),
          f"{overlay}: scheduler serves tls.crt/tls.key of Secret metronome-extender-tls", (cert, key))
    server_cert = certs.get("metronome-extender-tls", {})
    host = ext.get("urlPrefix", "").split("/")[2].split(":")[0]
    check(host in server_cert.get("dnsNames", []), f"{overlay}: cert-manager example names the urlPrefix host", host)
    client_ca = arg(sc, "--http-tls-client-ca-file")
    if mutual:
        check(secret_file(spod, client_ca or "") == ("metronome-extender-tls", "ca.crt"),
              f"{overlay}: scheduler requires client certificates signed by the same CA")
        client = (secret_file(kpod, tls.get("certFile", "")), secret_file(kpod, tls.get("keyFile", "")))
        check(client == (("metronome-extender-client-tls", "tls.crt"), ("metronome-extender-client-tls", "tls.key")),
              f"{overlay}: kube-scheduler presents the client certificate from its Secret", client)
        check("client auth" in certs.get("metronome-extender-client-tls", {}).get("usages", []),
              f"{overlay}: cert-manager example issues a client-auth certificate")
        # The kubelet's probes cannot present a client certificate: TCP, readiness on the
        # shims' port, which only the leader binds (Ready still means leading).
        check(all("tcpSocket" in sc.get(p, {}) for p in ("readinessProbe", "livenessProbe")),
              f"{overlay}: probes check the port over TCP")
        check(sc.get("readinessProbe", {}).get("tcpSocket", {}).get("port") in ("zmq", 7411),
              f"{overlay}: readiness on the shims' port (the leader's alone)", sc.get("readinessProbe"))
    else:
        check(client_ca is None and "certFile" not in tls, f"{overlay}: no client certificates")
        check(all(sc.get(p, {}).get("httpGet", {}).get("scheme") == "HTTPS" for p in ("readinessProbe", "livenessProbe")),
              f"{overlay}: probes use HTTPS")

# The shim port closed by default: CURVE with keys from a Secret, a NetworkPolicy admitting only
# training pods to it and only the extender's kube-scheduler and Prometheus to HTTP; plain
# ZeroMQ only as an explicit overlay.
def scheduler_config(objs):
    cm = find(objs, "ConfigMap", "metronome-config")
    return yaml.safe_load(cm["data"]["config.yaml"]) if cm else {}


def curve_mount(objs):
    d = find(objs, "Deployment", "metronome-scheduler")
    if not d:
        return None, None
    pod = d["spec"]["template"]["spec"]
    vol = next((v for v in pod.get("volumes", []) if v.get("secret", {}).get("secretName") == "metronome-curve"), None)
    mount = next((m for m in pod["containers"][0].get("volumeMounts", []) if vol and m["name"] == vol["name"]), None)
    return vol, mount


curve = scheduler_config(base).get("curve", {})
vol, mount = curve_mount(base)
check(vol is not None and mount is not None, "base: the scheduler mounts the Secret metronome-curve")
check(mount and all(str(curve.get(k, "")).startswith(mount["mountPath"] + "/")
                    for k in ("secret_key_file", "public_key_file")),
      "base: CURVE on, its key files from that Secret", curve)
check(not vol or not vol["secret"].get("optional"), "base: no Secret, no scheduler (not optional)")
check(scheduler_config(base).get("kubernetes", {}).get("verify_pods") is True,
      "base: shims' hellos are checked against their pods (kubernetes.verify_pods)")
dep_pod = find(base, "Deployment", "metronome-scheduler")["spec"]["template"]["spec"]
user = dep_pod["securityContext"].get("runAsUser")
check(vol and (vol["secret"].get("defaultMode", 0o644) & 0o040) and dep_pod["securityContext"].get("fsGroup") == user,
      "base: the non-root scheduler can read the key files (group-readable, fsGroup = its user)")
config_mount = next(m for m in dep_pod["containers"][0]["volumeMounts"] if m["name"] == "config")
check(mount and not mount["mountPath"].startswith(config_mount["mountPath"] + "/"),
      "base: the Secret is not mounted inside the read-only config volume")
pol = find(base, "NetworkPolicy", "metronome-scheduler")
check(pol is not None, "base has a NetworkPolicy for the scheduler")
if pol:
    spec = pol["spec"]
    check(spec["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "metronome-scheduler"}
          and spec["policyTypes"] == ["Ingress"], "it selects the scheduler's pods, ingress")
    by_port = {}
    for rule in spec["ingress"]:
        for port in rule["ports"]:
            by_port.setdefault(port["port"], []).extend(rule["from"])
    check(set(by_port) == {7411, 7412}, "it opens only the ZeroMQ and HTTP ports", set(by_port))
    labels = lambda peers: [p.get("podSelector", {}).get("matchLabels") for p in peers]
    check(all(p.get("podSelector") for p in by_port.get(7411, []) + by_port.get(7412, [])),
          "every peer is selected by pod labels (no open namespace or IP block)")
    check(labels(by_port.get(7411, [])) == [{"metronome.dev/shim": "true"}],
          "ZeroMQ: only pods labelled metronome.dev/shim", labels(by_port.get(7411, [])))
    check(sorted(map(str, labels(by_port.get(7412, [])))) ==
          sorted(map(str, [{"app.kubernetes.io/name": "metronome-kube-scheduler"},
                           {"app.kubernetes.io/name": "prometheus"}])),
          "HTTP: only the metronome kube-scheduler and Prometheus", labels(by_port.get(7412, [])))
    ks = find(base, "Deployment", "metronome-kube-scheduler")
    check(ks and ks["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/name") ==
          "metronome-kube-scheduler", "the kube-scheduler's pods carry the label HTTP admits")
plain = render("k8s/overlays/plain")
check("curve" not in scheduler_config(plain), "plain overlay: CURVE off")
check(curve_mount(plain) == (None, None), "plain overlay: no Secret mounted")
check(find(plain, "NetworkPolicy", "metronome-scheduler") is not None, "plain overlay: NetworkPolicy kept")
check(find(plain, "Deployment", "metronome-scheduler") is not None
      and len(find(plain, "Deployment", "metronome-scheduler")["spec"]["template"]["spec"]["volumes"]) == 1,
      "plain overlay: only the config volume left")

role = find(base, "ClusterRole", "metronome-scheduler")
if role:
    wild = [r for r in role["rules"] if "*" in r["verbs"] or "*" in r["resources"] or "*" in r["apiGroups"]]
    check(not wild, "RBAC has no wildcards")
    check(not any("secrets" in r["resources"] for r in role["rules"]), "RBAC grants no access to secrets")
    writes = {res for r in role["rules"] for res in r["resources"]
              if set(r["verbs"]) & {"create", "update", "patch", "delete"}}
    check(writes <= {"linkschedules", "linkschedules/status", "trafficprofiles/status"},
          "RBAC writes only LinkSchedules and CR status", writes)
    # What the code does (scheduler/kube/src/resources.cpp, kubernetes.cpp), and no more.
    granted = {(res, v) for r in role["rules"] for res in r["resources"] for v in r["verbs"]}
    used = {("pods", v) for v in ("get", "list", "watch")} | {("nodes", v) for v in ("get", "list", "watch")} \
        | {("trafficprofiles", v) for v in ("get", "list", "watch")} | {("trafficprofiles/status", "patch")} \
        | {("linkschedules", v) for v in ("get", "list", "create")} | {("linkschedules/status", "patch")}
    check(granted == used, "the scheduler's ClusterRole grants what its code uses", sorted(granted ^ used))

# A Lease that an election only reads and writes is named: the second kube-scheduler cannot
# touch metronome-scheduler's Lease in the same namespace.
for name in ("metronome-kube-scheduler-leases", "metronome-scheduler-leader-election"):
    lrole = find(base, "Role", name)
    rules = (lrole or {}).get("rules", [])
    unnamed = [r for r in rules if "leases" in r["resources"] and not r.get("resourceNames")
               and set(r["verbs"]) - {"create"}]
    check(lrole is not None and not unnamed, f"{name}: only named Leases beyond create", unnamed)

job_objs = render("examples/k8s/indexed-job", "--load-restrictor", "LoadRestrictionsNone")
job = find(job_objs, "Job", "resnet-ddp")
if job:
    pod = job["spec"]["template"]["spec"]
    check(pod.get("schedulerName") == "metronome", "injected Job uses the metronome scheduler")
    init = [c for c in pod.get("initContainers", []) if c["name"] == "metronome-shim"]
    check(init and init[0]["command"][0] == "cp", "init container copies the shim")
    trainer = next(c for c in pod["containers"] if c["name"] == "trainer")
    env = {e["name"]: e for e in trainer.get("env", [])}
    check(env.get("LD_PRELOAD", {}).get("value", "").endswith("/libmetronome.so"), "LD_PRELOAD set")
    check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
          "NODE_NAME from the downward API")
    check("METRONOME_JOB" in env and "METRONOME_SCHEDULER" in env, "job name and scheduler address set")
    # The pod's identity, which a scheduler with kubernetes.verify_pods checks against the API server.
    for name, path in (("METRONOME_NAMESPACE", "metadata.namespace"), ("METRONOME_POD", "metadata.name"),
                       ("METRONOME_POD_UID", "metadata.uid")):
        check(env.get(name, {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == path,
              f"{name} from the downward API ({path})")
    check(job["spec"]["template"]["metadata"].get("labels", {}).get("metronome.dev/shim") == "true",
          "injected pods carry the label the NetworkPolicy admits")
    key = env.get("METRONOME_CURVE_SERVERKEY", {}).get("valueFrom", {}).get("configMapKeyRef", {})
    check(key.get("name") == "metronome-curve-public" and key.get("key") == "curve.pub",
          "the scheduler's CURVE public key from a ConfigMap in the job's namespace", key)
    check(trainer["command"][0] == "torchrun", "the training command is untouched")

pj = [d for d in yaml.safe_load_all(open(f"{root}/examples/k8s/pytorchjob.yaml")) if d]
check(pj and pj[0]["kind"] == "PyTorchJob", "PyTorchJob example parses")
if pj:
    for role_name, spec in pj[0]["spec"]["pytorchReplicaSpecs"].items():
        pod = spec["template"]["spec"]
        envs = {e["name"] for e in pod["containers"][0]["env"]}
        check(pod["schedulerName"] == "metronome" and "LD_PRELOAD" in envs, f"PyTorchJob {role_name} is injected")
        check({"METRONOME_NAMESPACE", "METRONOME_POD", "METRONOME_POD_UID"} <= envs,
              f"PyTorchJob {role_name} gives the shim its pod's identity")
        check(spec["template"]["metadata"].get("labels", {}).get("metronome.dev/shim") == "true"
              and "METRONOME_CURVE_SERVERKEY" in envs, f"PyTorchJob {role_name} may reach the scheduler")

passed = sum(results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if all(results) else 1)
