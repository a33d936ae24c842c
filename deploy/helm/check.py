"""Checks deploy/helm/forewarn: `helm lint --strict` and `helm template`
(Helm's own Go SDK through the helm-python-sdk wheel), then every rendered
object against the Kubernetes OpenAPI schemas (kubernetes-validate, strict:
unknown fields are errors) and forewarn's own rules: one replica, the
probes, the volumes, the config parses and listens on the container port.

Run by scripts/package-check.sh in its tools venv:  python check.py CHART
"""

import sys
import tomllib

import helm_python as helm
import kubernetes_validate as kv
import yaml

# The oldest and newest Kubernetes the schemas ship; Chart.yaml asks >= 1.23.
KUBE_VERSIONS = ["1.25.0", kv.latest_version()]

# Value sets rendered: the defaults, everything switched on, a Secret made
# outside the chart, no persistence.
SCENARIOS = {
    "defaults": {},
    "everything": {
        "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
        "secrets": {
            "apiToken": "t0ken",
            "readToken": "r3ad",
            "extra": {"FOREWARN_PD_ROUTING_KEY": "pd", "FOREWARN_SLACK_WEBHOOK": "https://hooks.example/x"},
        },
        "extraVolumes": [{"name": "models", "persistentVolumeClaim": {"claimName": "forewarn-models"}}],
        "extraVolumeMounts": [{"name": "models", "mountPath": "/var/lib/forewarn-models", "readOnly": True}],
        "priorityClassName": "system-cluster-critical",
        "podDisruptionBudget": {"maxUnavailable": 0},
    },
    "existing-secret": {"secrets": {"existingSecret": "forewarn-keys"}},
    "ephemeral": {"persistence": {"enabled": False}, "service": {"type": "NodePort"}},
}

# Values the chart must refuse, and a word the error must contain.
REFUSED = {
    "two replicas": ({"replicaCount": 2}, "replicaCount"),
    "a typo'd persistence key": ({"persistence": {"sise": "1Gi"}}, "sise"),
    "a secret name that is no variable": ({"secrets": {"extra": {"pd-key": "x"}}}, "pd-key"),
}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def lint(chart, values, label):
    report = helm.lint(chart, values, strict=True)
    for m in report.get("messages", []):
        # Severity 1 is Helm's INFO ("icon is recommended").
        if m["severity"] > 1:
            fail(f"helm lint ({label}): {m['path']}: {m['error'].strip()}")
    return report


def render(chart, values):
    with helm.Chart.load(chart) as c:
        out = c.render(values, name="fw", namespace="gpu", is_install=True)
    docs = []
    for path, text in sorted(out.items()):
        if not path.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append((path, doc))
    return docs


def by_kind(docs, kind):
    return [d for _, d in docs if d["kind"] == kind]


def check_forewarn_rules(label, docs, values):
    sts = by_kind(docs, "StatefulSet")
    if len(sts) != 1:
        return fail(f"{label}: {len(sts)} StatefulSets, want 1")
    sts = sts[0]
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    if spec["replicas"] != 1:
        fail(f"{label}: replicas {spec['replicas']}")
    services = {s["metadata"]["name"]: s for s in by_kind(docs, "Service")}
    if spec["serviceName"] not in services or services[spec["serviceName"]]["spec"].get("clusterIP") != "None":
        fail(f"{label}: serviceName {spec['serviceName']} is not a headless Service of the chart")
    probes = {p: c.get(p, {}).get("httpGet", {}).get("path") for p in ("livenessProbe", "readinessProbe", "startupProbe")}
    if probes != {"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/healthz"}:
        fail(f"{label}: probes {probes}")
    sc = c["securityContext"]
    if not (sc.get("readOnlyRootFilesystem") and sc.get("allowPrivilegeEscalation") is False
            and sc.get("capabilities", {}).get("drop") == ["ALL"]):
        fail(f"{label}: container securityContext {sc}")
    if not pod["securityContext"].get("runAsNonRoot"):
        fail(f"{label}: pod may run as root")
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"] for v in pod["volumes"]}
    volumes |= {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
    for path, name in mounts.items():
        if name not in volumes:
            fail(f"{label}: {path} mounts {name}, no such volume")
    if mounts.get("/var/lib/forewarn") != "data":
        fail(f"{label}: /var/lib/forewarn is not the data volume")
    persistent = values.get("persistence", {}).get("enabled", True)
    if persistent != bool(spec.get("volumeClaimTemplates")):
        fail(f"{label}: persistence.enabled={persistent} but volumeClaimTemplates {spec.get('volumeClaimTemplates')}")
    # The config: TOML, state under the volume, listening on the container port.
    (cm,) = by_kind(docs, "ConfigMap")
    try:
        cfg = tomllib.loads(cm["data"]["forewarn.toml"])
    except tomllib.TOMLDecodeError as e:
        return fail(f"{label}: forewarn.toml does not parse: {e}")
    port = c["ports"][0]["containerPort"]
    listen = cfg.get("api", {}).get("listen", "")
    if not listen.endswith(f":{port}") or listen.startswith("127."):
        fail(f"{label}: [api] listen {listen!r} is not reachable on containerPort {port}")
    for key, path in (("checkpoint", cfg.get("checkpoint", {}).get("dir")), ("export", cfg.get("export", {}).get("dir"))):
        if path and not path.startswith("/var/lib/forewarn/"):
            fail(f"{label}: [{key}] dir {path} is off the state volume (read-only root)")
    # Secrets: what the pod reads exists (or is the user's).
    secrets = {s["metadata"]["name"] for s in by_kind(docs, "Secret")}
    existing = values.get("secrets", {}).get("existingSecret")
    for ref in c.get("envFrom", []):
        name = ref["secretRef"]["name"]
        if name not in secrets and name != existing:
            fail(f"{label}: envFrom names Secret {name}, not rendered")
    # The ServiceMonitor scrapes one Service, by a port name it has.
    for sm in by_kind(docs, "ServiceMonitor"):
        sel = sm["spec"]["selector"]["matchLabels"]
        hit = [n for n, s in services.items() if sel.items() <= s["metadata"]["labels"].items()]
        if len(hit) != 1:
            fail(f"{label}: ServiceMonitor selects {hit}, want one Service")
        else:
            names = {p["name"] for p in services[hit[0]]["spec"]["ports"]}
            for ep in sm["spec"]["endpoints"]:
                if ep["port"] not in names or ep["path"] != "/metrics":
                    fail(f"{label}: ServiceMonitor endpoint {ep}")
    for pdb in by_kind(docs, "PodDisruptionBudget"):
        if pdb["spec"]["selector"]["matchLabels"].items() > spec["selector"]["matchLabels"].items():
            fail(f"{label}: the PodDisruptionBudget does not select the pod")


def main(chart):
    lint(chart, None, "defaults")
    for label, values in SCENARIOS.items():
        lint(chart, values, label)
        docs = render(chart, values)
        kinds = sorted(d["kind"] for _, d in docs)
        print(f"== {label}: {len(docs)} objects: {', '.join(kinds)}")
        for path, doc in docs:
            if doc["apiVersion"].startswith("monitoring.coreos.com/"):
                continue  # a CRD: no schema ships; its shape is checked below
            for version in KUBE_VERSIONS:
                try:
                    kv.validate(doc, version, strict=True)
                except kv.ValidationError as e:
                    fail(f"{label}: {path}: {doc['kind']} invalid for Kubernetes {version}: {e.message} at {list(e.path)}")
                except kv.SchemaNotFoundError as e:
                    fail(f"{label}: {path}: no schema for {doc['kind']} ({e})")
        check_forewarn_rules(label, docs, values)
    for label, (values, word) in REFUSED.items():
        try:
            render(chart, values)
            fail(f"refused values rendered: {label}")
        except Exception as e:  # the SDK's HelmValuesError / HelmRenderError
            if word not in str(e):
                fail(f"{label}: refused, but the error does not name {word!r}: {e}")
            else:
                print(f"== refused as it should: {label}: {str(e).strip().splitlines()[-1]}")
    print(f"helm {helm.helm_sdk_version()} (helm-python-sdk), schemas of Kubernetes {', '.join(KUBE_VERSIONS)}")
    if failures:
        print(f"{len(failures)} chart check(s) failed")
        return 1
    print("chart checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "deploy/helm/forewarn"))
