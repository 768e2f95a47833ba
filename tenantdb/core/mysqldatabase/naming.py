"""The identity of the MysqlDatabase kind: its API names, short names and finalizer. Pure."""

from __future__ import annotations

from tenantdb.core.kinds import KindIdentity

IDENTITY = KindIdentity(
    group="shipstream.io",
    version="v1alpha1",
    kind="MysqlDatabase",
    plural="mysqldatabases",
    finalizer="shipstream.io/mysqldatabase",
    label_name="shipstream.io/mysqldatabase-name",
    label_namespace="shipstream.io/mysqldatabase-namespace",
    label_cluster="shipstream.io/mysqldatabase-cluster",
    short_names=("mydb", "mydbs"),
    categories=("bloodraven", "mysql"),
)
"""The MysqlDatabase kind (seed 004)."""

CLAIM_INDEX = "mysqlclaims"
"""The family of the claim index the watcher keeps of the kind's orders in Redis: per
(cluster, namespace), which orders carry which schema, owner and users on which group."""

OWNER_NAME_INDEX = "mysqlownernames"
"""The family of the owner-name index the watcher keeps of Secrets in Redis: per (cluster,
namespace), which Secrets name which username (as a digest, never the value). A pass finds
from it the peers that recorded no owner yet and whose Secret names one of its users."""
