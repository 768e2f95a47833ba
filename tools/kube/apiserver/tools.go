//go:build tools

// Package tools records the commands built from the Kubernetes release, so that
// `go mod tidy` keeps their requirements.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
