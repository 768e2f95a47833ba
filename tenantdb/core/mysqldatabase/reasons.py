"""Phases and reasons of a MysqlDatabase, and the messages the ownership checks give. Pure."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """status.phase of a MysqlDatabase."""

    PENDING = "Pending"
    CREATING = "Creating"
    READY = "Ready"
    FAILED = "Failed"
    DELETING = "Deleting"


class Reason(StrEnum):
    """The reasons of a MysqlDatabase's Ready condition (and of its Warning events)."""

    # Pending: a dependency is not ready yet, or a transient error; retried.
    GROUP_NOT_FOUND = "GroupNotFound"
    GROUP_TERMINATING = "GroupTerminating"
    NO_ACTIVE_SITE = "NoActiveSite"
    RESTORE_IN_PROGRESS = "RestoreInProgress"
    PLANNED_FAILOVER_IN_PROGRESS = "PlannedFailoverInProgress"
    OWNER_SECRET_MISSING = "OwnerSecretMissing"  # noqa: S105 - a reason, not a secret
    OWNER_SECRET_INCOMPLETE = "OwnerSecretIncomplete"  # noqa: S105 - a reason
    GROUP_SECRET_MISSING = "GroupSecretMissing"  # noqa: S105 - a reason
    PEER_OWNER_SECRET_MISSING = "PeerOwnerSecretMissing"  # noqa: S105 - a reason
    PRIMARY_UNAVAILABLE = "PrimaryUnavailable"
    # Failed: a verdict about the order itself; re-checked every minute.
    INVALID_SPEC = "InvalidSpec"
    OWNER_USER_RESERVED = "OwnerUserReserved"
    DATABASE_NAME_CONFLICT = "DatabaseNameConflict"
    OWNER_CONFLICT = "OwnerConflict"
    DATABASE_PRE_EXISTS = "DatabasePreExists"
    PRE_EXISTING_OWNER_USER = "PreExistingOwnerUser"
    GRANT_USER_MISSING = "GrantUserMissing"
    MYSQL_ERROR = "MySQLError"
    # The other phases.
    APPLYING = "Applying"
    DATABASE_RECONCILED = "DatabaseReconciled"
    DELETING = "Deleting"


def msg_database_name_conflict(peer: str, database: str, group: str) -> str:
    """Another, older order already declares the schema on the group."""
    return (
        f'MysqlDatabase "{peer}" already declares database "{database}" on group "{group}";'
        " two CRs must not manage one database (deletionPolicy: Delete on either would drop"
        " the other's data)"
    )


_DISTINCT_OWNER = (
    "each MysqlDatabase must own a distinct user (deleting one CR would drop the other's"
    " credential)"
)


def msg_owner_secret_shared(peer: str, secret: str, group: str) -> str:
    """Another, older order uses the same owner Secret on the group."""
    return (
        f'MysqlDatabase "{peer}" already shares owner Secret "{secret}" on group "{group}";'
        f" {_DISTINCT_OWNER}"
    )


def msg_owner_user_taken(peer: str, username: str, group: str) -> str:
    """Another, older order owns the same MySQL user on the group."""
    return (
        f'MysqlDatabase "{peer}" already owns MySQL user "{username}" on group "{group}";'
        f" {_DISTINCT_OWNER}"
    )


def msg_peer_owner_secret_missing(peer: str, secret: str) -> str:
    """An older order's owner is not known yet, so the check against it cannot finish."""
    return (
        f'higher-ranked MysqlDatabase "{peer}"\'s owner Secret "{secret}" cannot be read;'
        " deferring until the ownership check against it can be complete"
    )


def msg_owner_user_reserved(secret: str, username: str, group: str) -> str:
    """The owner Secret names one of the group's own accounts."""
    return (
        f'Secret "{secret}" names owner user "{username}", which is a credential of'
        f' MysqlFailoverGroup "{group}"; a MysqlDatabase owns only its own tenant user and'
        " must not set the password of a group-level principal"
    )
