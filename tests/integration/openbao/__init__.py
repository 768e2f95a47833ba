"""tenantdb's OpenBao adapter against the OpenBao stand-in (devstack/openbao), whose own tests are
the devstack's (devstack/tests/openbao)."""
