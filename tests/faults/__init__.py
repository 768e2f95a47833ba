"""Fault injection on the devstack with tenantdb's real processes (see ``conftest.py``)."""
