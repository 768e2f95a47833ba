"""Tests of the OpenBao stand-in (devstack/openbao), through hvac and the real MariaDB."""
