"""A mariadb-operator stand-in: MariaDB health and Database schemas on the real MariaDB.

Owns running the `k8s.mariadb.com/v1alpha1` MariaDB and Database controllers as threads in the
devstack process, on every cluster it is given (see `controller` for the behaviour, the stop-time
cleanup and what is left out). Production code never imports it.
"""

from devstack.mariadb_operator.controller import FINALIZER, MariaDBOperator
from devstack.mariadb_operator.sql import Server

__all__ = ["FINALIZER", "MariaDBOperator", "Server"]
