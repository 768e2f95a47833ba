//go:build tools

// Package tools records the ESO controller as a requirement, so that `go mod tidy` keeps it.
package tools

import _ "github.com/external-secrets/external-secrets"
