#!/usr/bin/env bash
# What operators deploy, checked with the real tools (installed by scripts/deps.d/deploy.sh
# and envoy.sh; run by scripts/test.sh after the cargo tests, whose debug build of
# `ratelimit` it uses):
# - deploy/kubernetes/*.yaml against the Kubernetes schemas (kubernetes-validate, strict:
#   unknown fields fail), for the oldest version they need (1.30: the preStop sleep) and
#   the newest the validator knows;
# - the Deployment against the Containerfile (rules volume, user) and the ConfigMap, and the
#   ConfigMap's files through `ratelimit check-config`;
# - the Envoy configurations (deploy/kubernetes/envoy/, examples/envoy/) through
#   `envoy --mode validate`;
# - deploy/monitoring/alerts.yaml through `promtool check rules` and its unit tests.
# The image, the Envoy example and the metric names are checked by cargo tests
# (servers/ratelimit/tests/container.rs, envoy_example.rs, deploy_metrics.rs).
set -euo pipefail
cd "$(dirname "$0")/../.."

need() {
    [ -n "${!1:-}" ] && [ -x "${!1}" ] || {
        echo "deploy.sh: $1 is not set to an executable; source scripts/deps.sh first" >&2
        exit 1
    }
}
need KUBERNETES_VALIDATE_BIN
need PROMTOOL_BIN
need ENVOY_BIN
RATELIMIT_BIN=${RATELIMIT_BIN:-target/debug/ratelimit}
[ -x "$RATELIMIT_BIN" ] || cargo build --quiet --locked -p ratelimit-server --bin ratelimit

echo "-- Kubernetes manifests"
for version in 1.30.0 1.37.0; do
    "$KUBERNETES_VALIDATE_BIN" --strict --quiet -k "$version" deploy/kubernetes/*.yaml
done

echo "-- the manifests agree with the image; the rules ConfigMap through check-config"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# PyYAML comes with kubernetes-validate, in its virtual environment.
"$(dirname "$KUBERNETES_VALIDATE_BIN")/python3" - "$work" <<'EOF'
import json, re, sys, yaml
cf = open("Containerfile").read()
volume = json.loads(re.search(r"^VOLUME (.*)$", cf, re.M).group(1))
user = re.search(r"^USER (\d+):(\d+)$", cf, re.M).groups()
deployment = yaml.safe_load(open("deploy/kubernetes/deployment.yaml"))
pod = deployment["spec"]["template"]["spec"]
container = pod["containers"][0]
mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
assert [mounts["rules"]] == volume, (mounts, volume)
context = pod["securityContext"]
assert (str(context["runAsUser"]), str(context["runAsGroup"])) == user, (context, user)
configmap = yaml.safe_load(open("deploy/kubernetes/rules-configmap.yaml"))
rules_volume = next(v for v in pod["volumes"] if v["name"] == "rules")
assert rules_volume["configMap"]["name"] == configmap["metadata"]["name"]
for name, text in configmap["data"].items():
    with open(f"{sys.argv[1]}/{name}", "w") as out:
        out.write(text)
EOF
"$RATELIMIT_BIN" check-config "$work"

echo "-- Envoy configurations"
for cfg in deploy/kubernetes/envoy/*.yaml examples/envoy/envoy.yaml; do
    "$ENVOY_BIN" --mode validate -c "$cfg" -l error
done

echo "-- alerting rules"
"$PROMTOOL_BIN" check rules deploy/monitoring/alerts.yaml
"$PROMTOOL_BIN" test rules deploy/monitoring/alerts-test.yaml
echo "deploy checks passed"
