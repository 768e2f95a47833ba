"""Stand-ins for what tenantdb talks to but these machines cannot run, for tests and the demo.

Kubernetes API servers, OpenBao, ESO, mariadb-operator and cert-manager, each faithful to the real
project as far as tenantdb and the official clients can tell. Production code never imports this
package (import-linter checks it) and production images do not ship it.
"""
