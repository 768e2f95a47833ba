"""Which MySQL failures are transient (the order waits Pending and retries) and which are not.

Transient: the server refusing writes while read-only (1290, super_read_only during a
promotion; 1836, read-only mode), and every failure of the connection itself (the client codes
2002, 2003, 2006, 2013 and 2055, a socket error, a timeout, a connection the driver already
knows is gone), which is what an unplanned failover looks like from a client; and a server too
busy for the statement now (``BUSY_CODES``). Any other server
error (a syntax error, access denied, a password policy) is a verdict on the order: Failed with
MySQLError. A server error means the statement
did not run; a connection failure means it may have. Pure.
"""

from __future__ import annotations

READ_ONLY_CODES = frozenset({1290, 1836})
CONNECTION_CODES = frozenset({2002, 2003, 2006, 2013, 2055})
BUSY_CODES = frozenset({1040, 1205, 1213, 1969})
"""The server too busy for the statement now: too many connections (1040), a lock wait
(1205, ``lock_wait_timeout``) or a deadlock (1213) the statement lost, or the statement
running past ``max_statement_time`` (1969). Waited out like a failover."""
STATEMENT_TIMEOUT = 1969


def is_transient(code: int | None, *, connection_failed: bool = False) -> bool:
    """Whether a failure is worth waiting out.

    Args:
        code: the MySQL server or client error number; None when there is none.
        connection_failed: the failure came from the connection (a socket error, a timeout).
    """
    if connection_failed:
        return True
    return code is not None and (
        code in READ_ONLY_CODES or code in CONNECTION_CODES or code in BUSY_CODES
    )


def may_have_run(code: int | None, *, connection_failed: bool = False) -> bool:
    """Whether a failed statement may have executed anyway (only a server error says no)."""
    if connection_failed:
        return True
    # A statement cut by max_statement_time may have done part of its work (a DDL on an engine
    # without atomic DDL): the order keeps its records for what it touched.
    return code is None or code in CONNECTION_CODES or code == STATEMENT_TIMEOUT
