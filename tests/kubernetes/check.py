"""Checks contrib/kubernetes offline (tests/kubernetes.rs runs it).

Built-in kinds are validated by kubernetes-validate against the Kubernetes
schemas, strictly (an unknown field is an error). The Prometheus Operator's
kinds are checked for what ties them to the rest: the ServiceMonitor
selects the Service and names its port and the token Secret the DaemonSet
mounts; the PrometheusRule's groups are the shipped alert rules
(contrib/prometheus/gputaskman-alerts.yml), and promtool checks them.
Every file is in kustomization.yaml. Prints one line per check; exits 1
with the reason on the first that fails.

usage: check.py CONTRIB_DIR PROMTOOL
"""
import os
import subprocess
import sys
import tempfile

import yaml

contrib, promtool = sys.argv[1], sys.argv[2]
k8s = os.path.join(contrib, "kubernetes")
validate = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")


def load(name):
    with open(os.path.join(k8s, name)) as f:
        return yaml.safe_load(f)


def check(ok, what):
    if not ok:
        sys.exit(f"FAILED: {what}")
    print(f"ok: {what}")


files = sorted(f for f in os.listdir(k8s) if f.endswith(".yaml") and f != "kustomization.yaml")
kustomization = load("kustomization.yaml")
check(sorted(kustomization["resources"]) == files, f"kustomization.yaml lists every manifest: {files}")

docs = {f: load(f) for f in files}
builtin = [f for f, d in docs.items() if not d["apiVersion"].startswith("monitoring.coreos.com/")]
run = subprocess.run([validate, "--strict", *builtin], cwd=k8s, capture_output=True, text=True)
said = run.stdout + run.stderr
check(run.returncode == 0 and "ERROR" not in said, f"kubernetes-validate --strict {builtin}:\n{said}")

by_kind = {d["kind"]: d for d in docs.values()}
ds, svc, sm, rule = (by_kind[k] for k in ["DaemonSet", "Service", "ServiceMonitor", "PrometheusRule"])
pod = ds["spec"]["template"]
container = pod["spec"]["containers"][0]
check(ds["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items(),
      "the DaemonSet selects its own pods")
check(svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items(), "the Service selects the DaemonSet's pods")
ports = {p["name"]: p["containerPort"] for p in container["ports"]}
args = container["args"]
listen = args[args.index("--listen") + 1]
check(int(listen.rsplit(":", 1)[1]) == ports["metrics"], f"serve listens on the metrics port ({listen})")
svc_port = svc["spec"]["ports"][0]
check(svc_port["targetPort"] in ports, "the Service's targetPort is a named container port")
check(sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items(),
      "the ServiceMonitor selects the Service")
endpoint = sm["spec"]["endpoints"][0]
check(endpoint["port"] == svc_port["name"], "the ServiceMonitor scrapes the Service's port by name")
secret = next(v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v)
token_mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "token")
check(args[args.index("--token-file") + 1].startswith(token_mount + "/"), "--token-file is in the mounted Secret")
check(endpoint["bearerTokenSecret"]["name"] == secret, f"the ServiceMonitor sends the token of Secret {secret}")
check(pod["spec"]["hostPID"] is True and container["securityContext"]["privileged"] is False
      and container["securityContext"]["allowPrivilegeEscalation"] is False,
      "host PIDs, unprivileged, no privilege escalation")
check(all(m.get("readOnly") for m in container["volumeMounts"]), "every mount is read-only")

with open(os.path.join(contrib, "prometheus", "gputaskman-alerts.yml")) as f:
    shipped = yaml.safe_load(f)
check(rule["spec"]["groups"] == shipped["groups"], "the PrometheusRule's groups are gputaskman-alerts.yml's")
with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
    yaml.safe_dump({"groups": rule["spec"]["groups"]}, f)
run = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
os.unlink(f.name)
check(run.returncode == 0, f"promtool check rules on the PrometheusRule's groups: {run.stdout}{run.stderr}")
