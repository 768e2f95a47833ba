"""The Kubernetes access MysqlDatabase needs, by role and place (``tenantdb.core.rbac``).

Written from the calls of ``tenantdb.adapters.mysqldatabase`` (its registered resources), the
scaffold's order reads and writes, and the routes of ``watcher.mysqldatabase``. MysqlDatabase is
served on the management cluster only, so it needs nothing of a target cluster. ``make gen``
renders it into the chart's Role rules; a unit test fails while the chart is stale.
"""

from __future__ import annotations

from tenantdb.core.mysqldatabase.naming import IDENTITY
from tenantdb.core.rbac import Grant, KindAccess, order_resource, patched_status, watched_orders

_ORDERS = order_resource(IDENTITY)
_GROUP = IDENTITY.group

ACCESS = KindAccess(
    watcher=(
        watched_orders(IDENTITY),
        Grant(
            _GROUP,
            ("mysqlfailovergroups",),
            ("list", "watch"),
            "a change of a failover group's primary or of its health.",
        ),
        Grant(
            "",
            ("secrets",),
            ("list", "watch"),
            "an order's owner password Secret (a new password is applied).",
        ),
    ),
    worker=(
        Grant(
            _GROUP,
            (_ORDERS,),
            ("get", "list", "patch"),
            "the order is read at the start of a pass and its finalizer set and dropped by"
            " patch; its siblings are listed for their claims, and the ops shell lists them.",
        ),
        patched_status(IDENTITY),
        Grant(
            _GROUP,
            ("mysqlfailovergroups",),
            ("get",),
            "the failover group: where its primary is and whether it may be written.",
        ),
        Grant(
            "",
            ("secrets",),
            ("get",),
            "the owner password, the group's credential and TLS Secrets are read.",
        ),
    ),
)
"""What MysqlDatabase needs of the management cluster."""
