"""The devstack's own tests: its stand-ins and CRDs checked on their own, with no tenantdb in the
way.

They run with tenantdb's (the root pyproject's `testpaths` collects them, so `make test` does),
and on their own from this directory; a stand-in checked through tenantdb is tenantdb's test.
"""
