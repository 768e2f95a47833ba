"""tenantdb's kinds, RBAC and client on the devstack's API server (the server's own tests are in
devstack/tests/kube)."""
