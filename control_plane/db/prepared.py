"""PostgreSQL: a transaction that wrote nothing ends with COMMIT, so the connection keeps the
statements psycopg prepared on it.

psycopg forgets every statement it prepared on a connection at each ROLLBACK, and has the
server deallocate them all (``DEALLOCATE ALL``): in case the transaction dropped or altered
what they name. The next executions of each statement on that connection are then sent
unprepared (psycopg prepares a statement at its fifth) and planned again, and PostgreSQL
plans the first five executions of a new prepared statement on their parameters before it
settles on a generic plan: about ten plans of every hot statement per ROLLBACK, each 0.7–1 ms
of the database's CPU for the write's commit statement.

Most ROLLBACKs a server sends end transactions that only read: a session closed without a
commit after its lookups, a job worker's poll that found nothing to claim. The server's
pooled connections run no DDL (migrations run before it serves). So when a transaction is
about to be rolled back, one query asks the server whether it wrote anything
(``txid_current_if_assigned()``: no transaction id is assigned until a transaction writes or
locks a row); if it did not, it ends with COMMIT — the same outcome, nothing to undo — and
the ROLLBACK that follows finds no transaction open, so psycopg keeps its statements. A
transaction that wrote, locked a row, or failed is rolled back as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_WROTE_NOTHING = "SELECT txid_current_if_assigned() IS NULL"


def wrote_nothing(connection: Any) -> bool:
    """Whether ``connection`` (psycopg) is in a transaction, not failed, that has written and
    locked nothing so far. False when it cannot tell (the question itself failed)."""
    from psycopg import Error
    from psycopg.pq import TransactionStatus

    if connection.info.transaction_status != TransactionStatus.INTRANS:
        return False
    try:
        with connection.cursor() as cursor:
            cursor.execute(_WROTE_NOTHING)
            row = cursor.fetchone()
    except Error:
        return False  # the transaction has failed now: the rollback ends it
    return bool(row and row[0])


def keeping_prepared(do_rollback: Callable[[Any], None]) -> Callable[[Any], None]:
    """A dialect's ``do_rollback`` that first ends with COMMIT a transaction that wrote
    nothing (see the module's text)."""

    from psycopg import Error  # only PostgreSQL engines get here: [postgres]
    from psycopg.pq import TransactionStatus

    idle = TransactionStatus.IDLE

    def rollback(connection: Any) -> None:
        # SQLAlchemy hands its pool's proxy of the connection; psycopg's is behind it
        driver = getattr(connection, "driver_connection", None) or connection
        if driver.info.transaction_status == idle:
            return  # no transaction open (a statement run in autocommit): nothing to end
        if wrote_nothing(driver):
            try:
                driver.commit()
            except Error:
                pass  # ended anyway, or the connection is lost: the rollback below tells
        do_rollback(connection)

    return rollback
