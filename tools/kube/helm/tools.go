//go:build tools

// Package tools records the helm command as a requirement, so that `go mod tidy` keeps it.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
