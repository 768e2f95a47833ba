#!/usr/bin/env bash
# Builds the real Kubernetes control plane the slow integration tests run against:
#   tools/kube/bin/kube-apiserver, tools/kube/bin/kube-controller-manager  (module ./apiserver)
#   tools/kube/bin/etcd                                                    (module ./etcd)
#   tools/kube/bin/helm                                                    (module ./helm)
# Each binary is rebuilt only when its module's go.mod or go.sum is newer than it and differs
# from what it was built from (recorded in bin/NAME.sum, so that binaries restored from a CI
# cache into a fresh checkout, whose files are all new, still count as up to date).
# The first build downloads the modules and compiles them (minutes); see README.md.
#
# Environment: GO (the go command; default: go on PATH, else /usr/local/go/bin/go),
# KUBE_BUILD_JOBS (go build -p; default 2). The build runs under nice -n 19.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$here/bin"

go_cmd="${GO:-}"
if [[ -z "$go_cmd" ]]; then
    go_cmd="$(command -v go || true)"
fi
if [[ -z "$go_cmd" && -x /usr/local/go/bin/go ]]; then
    go_cmd=/usr/local/go/bin/go
fi
if [[ -z "$go_cmd" ]] || ! command -v "$go_cmd" >/dev/null 2>&1; then
    echo "tools/kube/build.sh: go not found; install Go 1.26 or newer, or set GO=/path/to/go" >&2
    exit 1
fi

# Use the pinned go.mod/go.sum as they are: fail instead of editing them, ignore any go.work.
export GOFLAGS="-mod=readonly -buildvcs=false"
export GOWORK=off
jobs="${KUBE_BUILD_JOBS:-2}"

mkdir -p "$bin"

# module_sum MODULE_DIR: one hash of the module's go.mod and go.sum.
module_sum() {
    cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -d' ' -f1
}

# up_to_date BINARY MODULE_DIR: the binary exists and is newer than the module's go.mod and
# go.sum, or was built from the same go.mod and go.sum.
up_to_date() {
    [[ -x "$1" ]] || return 1
    [[ "$1" -nt "$2/go.mod" && "$1" -nt "$2/go.sum" ]] && return 0
    [[ -f "$1.sum" && "$(cat "$1.sum")" == "$(module_sum "$2")" ]]
}

# build NAME MODULE_DIR PACKAGE [LDFLAGS...]
build() {
    local name="$1" module="$2" package="$3" target="$bin/$1"
    shift 3
    local version
    version="$(cd "$module" && nice -n 19 "$go_cmd" list -m -f '{{.Version}}' "${package%%/cmd/*}")"
    if up_to_date "$target" "$module"; then
        echo "$name $version: up to date ($target)"
        return
    fi
    local started=$SECONDS
    (cd "$module" && nice -n 19 "$go_cmd" build -p "$jobs" -trimpath \
        -ldflags="-s -w $*" -o "$target.tmp" "$package")
    mv -f "$target.tmp" "$target"
    module_sum "$module" >"$target.sum"
    echo "$name $version: built in $((SECONDS - started))s ($target)"
}

kube_version="$(cd "$here/apiserver" && nice -n 19 "$go_cmd" list -m -f '{{.Version}}' k8s.io/kubernetes)"
kube_minor="${kube_version#v1.}"
kube_minor="${kube_minor%%.*}"
# What `kubectl version` and /version report; without these the server says v0.0.0-master.
kube_ldflags=(
    "-X k8s.io/component-base/version.gitVersion=$kube_version"
    "-X k8s.io/component-base/version.gitMajor=1"
    "-X k8s.io/component-base/version.gitMinor=$kube_minor"
    "-X k8s.io/component-base/version.gitTreeState=clean"
)

build etcd "$here/etcd" go.etcd.io/etcd/server/v3
build kube-apiserver "$here/apiserver" k8s.io/kubernetes/cmd/kube-apiserver "${kube_ldflags[@]}"
build kube-controller-manager "$here/apiserver" k8s.io/kubernetes/cmd/kube-controller-manager \
    "${kube_ldflags[@]}"

helm_version="$(cd "$here/helm" && nice -n 19 "$go_cmd" list -m -f '{{.Version}}' helm.sh/helm/v4)"
# What `helm version` and .Capabilities.HelmVersion report; without these Helm says v4.N.
build helm "$here/helm" helm.sh/helm/v4/cmd/helm \
    "-X helm.sh/helm/v4/internal/version.version=$helm_version" \
    "-X helm.sh/helm/v4/internal/version.gitTreeState=clean"
