# What operators deploy (deploy/, Containerfile, examples/envoy): buildah builds and runs
# the image without a daemon (servers/ratelimit/tests/container.rs), Debian's prometheus
# package brings promtool for the alerting rules, and kubernetes-validate (PyPI, with the
# Kubernetes schemas inside the package, so validation runs offline) checks the manifests
# (scripts/test.d/deploy.sh); examples/envoy/run.sh shows its answers with curl. Tests that
# need them fail rather than skip once this ran.
need_apt buildah prometheus curl python3 python3-venv
# The package starts a Prometheus server where it can; the tests run promtool only.
service prometheus stop >/dev/null 2>&1 || true
DEPLOY_VENV=.tmp/deploy-venv
if [ ! -x "$DEPLOY_VENV/bin/kubernetes-validate" ]; then
    python3 -m venv "$DEPLOY_VENV"
    "$DEPLOY_VENV/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==1.37.0"
fi
export KUBERNETES_VALIDATE_BIN="$PWD/$DEPLOY_VENV/bin/kubernetes-validate"
PROMTOOL_BIN=$(command -v promtool)
export PROMTOOL_BIN
export RATELIMIT_REQUIRE_BUILDAH=1
