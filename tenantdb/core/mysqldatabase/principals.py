"""The accounts a MysqlDatabase may never own: the failover group's own principals.

The owner's password is applied from its Secret with ALTER USER; pointed at a group account, that
statement would reset a privileged account's password. So the group's accounts are reserved:
the built-in ones, and every username the group's credential Secrets name (``username``,
``MYSQL_REPLICATION_USER`` and the user of a ``dsn``). The check fails closed: a Secret that
cannot be read, or a ``dsn`` that cannot be parsed, is an error, never a smaller reserved set.
Error messages name Secrets and keys, never a value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

ALWAYS_RESERVED = frozenset(
    {"root", "replicator", "mysql.sys", "mysql.session", "mysql.infoschema", "mariadb.sys"}
)
"""The built-in accounts: MySQL's, and MariaDB's owner of its system views (``mariadb.sys``)."""

# A Go MySQL driver DSN: [user[:password]@][net[(addr)]]/dbname[?params]
_DSN_USER = re.compile(r"^(?P<user>[^:@/]*)(?::[^@]*)?@[^/]*/")


class GroupSecretUnreadableError(LookupError):
    """A group credential Secret could not be read; nothing may be decided without it."""

    def __init__(self, secret: str) -> None:
        super().__init__(f"group credential Secret {secret!r} cannot be read")
        self.secret = secret


class GroupSecretInvalidError(ValueError):
    """A group credential Secret holds a value that cannot be read as what it must be."""


def compute_reserved_usernames(
    group_secrets: Mapping[str, Mapping[str, str] | None],
) -> frozenset[str]:
    """Every username a MysqlDatabase owner may not take on this group.

    Args:
        group_secrets: each group credential Secret by name, as its decoded data; None for a
            Secret that could not be read (NotFound included).

    Raises:
        GroupSecretUnreadableError: a group Secret could not be read.
        GroupSecretInvalidError: a ``dsn`` that names no user in the driver's form.
    """
    reserved = set(ALWAYS_RESERVED)
    for name, data in sorted(group_secrets.items()):
        if data is None:
            raise GroupSecretUnreadableError(name)
        for key in ("username", "MYSQL_REPLICATION_USER"):
            if data.get(key):
                reserved.add(data[key])
        dsn = data.get("dsn")
        if dsn:
            found = _DSN_USER.match(dsn)
            if found is None:
                raise GroupSecretInvalidError(
                    f"group credential Secret {name!r}: key dsn is not a MySQL DSN"
                    " (user[:password]@net(address)/database)"
                )
            if found["user"]:
                reserved.add(found["user"])
    return frozenset(reserved)
