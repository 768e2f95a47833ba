"""A Bloodraven stand-in: a MySQL failover group on two real MariaDB servers the devstack starts.

Owns the `shipstream.io/v1alpha1` MysqlFailoverGroup side of the devstack: `servers` runs the real
`mariadbd` processes, `replication` holds the group's SQL, `group.MysqlGroup` is the running
group (dc1 primary, dc2 its GTID replica, the group-level accounts) with the controls tests use,
and `controller.BloodravenOperator` runs planned failovers requested by annotation on the group
objects it serves, with their status phases and Events; `tls` issues the sites' server
certificates when the group serves TLS (`MysqlGroup.start(..., tls=...)`). Production code never
imports it.
"""

from devstack.mysql_group.controller import (
    ANNOTATION,
    DEFAULT_DWELL,
    BloodravenOperator,
)
from devstack.mysql_group.group import INITIAL_PRIMARY, SITES, GroupError, MysqlGroup
from devstack.mysql_group.replication import REPLICATION_USER, Account
from devstack.mysql_group.servers import ServerError, binaries_present
from devstack.mysql_group.tls import GroupTLS, server_name

__all__ = [
    "ANNOTATION",
    "DEFAULT_DWELL",
    "INITIAL_PRIMARY",
    "REPLICATION_USER",
    "SITES",
    "Account",
    "BloodravenOperator",
    "GroupError",
    "GroupTLS",
    "MysqlGroup",
    "ServerError",
    "binaries_present",
    "server_name",
]
