"""Append-only enforcement in the database, and its single maintenance exemption.

PostgreSQL: a BEFORE UPDATE OR DELETE row trigger and a BEFORE TRUNCATE statement
trigger refuse the change unless BOTH the session setting
`controlplane.audit_maintenance` is 'on' AND the current role is a member of the
table's owner role. Any role may set a custom setting, so the owner check is what
keeps the production runtime role (a non-owner with DML grants) out; migrations and
the test runner's flush run as the owner inside `maintenance()`.

SQLite: BEFORE UPDATE and BEFORE DELETE triggers abort unless the SQL function
`audit_maintenance_allowed()` returns 1. The function is registered on every
connection Django opens (connection_created) and reads a thread-local flag that
only `maintenance()` sets; a connection without it (the sqlite3 CLI) fails with
"no such function", so it is refused too. SQLite has no TRUNCATE.

SQLite rebuilds a table (copy, drop, rename) for most ALTERs, which drops its
triggers. Any future migration that alters the audit table must call
`install_triggers(schema_editor.connection)` after its schema operations (as
0002_append_only_triggers does); tests assert `missing_audit_triggers() == []`
after all migrations.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.dispatch import receiver

__all__ = [
    "AUDIT_TABLE",
    "MAINTENANCE_SETTING",
    "audit_triggers_present",
    "drop_triggers",
    "install_triggers",
    "maintenance",
    "missing_audit_triggers",
]

AUDIT_TABLE = "audit_auditevent"
MAINTENANCE_SETTING = "controlplane.audit_maintenance"
SQLITE_FUNCTION = "audit_maintenance_allowed"
REFUSAL = "audit log is append-only"

_PG_FUNCTION = "audit_auditevent_append_only"
_PG_TRIGGERS = ["audit_auditevent_no_update_delete", "audit_auditevent_no_truncate"]
_SQLITE_TRIGGERS = ["audit_auditevent_no_update", "audit_auditevent_no_delete"]

_PG_INSTALL = [
    f"""
    CREATE OR REPLACE FUNCTION {_PG_FUNCTION}() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        IF coalesce(current_setting('{MAINTENANCE_SETTING}', true), '') = 'on'
           AND pg_has_role(current_user,
                           (SELECT relowner FROM pg_class WHERE oid = TG_RELID),
                           'MEMBER') THEN
            IF TG_LEVEL = 'STATEMENT' THEN
                RETURN NULL;
            ELSIF TG_OP = 'DELETE' THEN
                RETURN OLD;
            END IF;
            RETURN NEW;
        END IF;
        RAISE EXCEPTION '{REFUSAL}: % on % refused', TG_OP, TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege';
    END
    $$
    """,
    f"DROP TRIGGER IF EXISTS {_PG_TRIGGERS[0]} ON {AUDIT_TABLE}",
    f"""
    CREATE TRIGGER {_PG_TRIGGERS[0]} BEFORE UPDATE OR DELETE ON {AUDIT_TABLE}
    FOR EACH ROW EXECUTE FUNCTION {_PG_FUNCTION}()
    """,
    f"DROP TRIGGER IF EXISTS {_PG_TRIGGERS[1]} ON {AUDIT_TABLE}",
    f"""
    CREATE TRIGGER {_PG_TRIGGERS[1]} BEFORE TRUNCATE ON {AUDIT_TABLE}
    FOR EACH STATEMENT EXECUTE FUNCTION {_PG_FUNCTION}()
    """,
]
_PG_DROP = [
    f"DROP TRIGGER IF EXISTS {_PG_TRIGGERS[0]} ON {AUDIT_TABLE}",
    f"DROP TRIGGER IF EXISTS {_PG_TRIGGERS[1]} ON {AUDIT_TABLE}",
    f"DROP FUNCTION IF EXISTS {_PG_FUNCTION}()",
]
_SQLITE_INSTALL = [
    sql
    for name, operation in zip(_SQLITE_TRIGGERS, ["UPDATE", "DELETE"])
    for sql in (
        f"DROP TRIGGER IF EXISTS {name}",
        f"""
        CREATE TRIGGER {name} BEFORE {operation} ON {AUDIT_TABLE}
        WHEN {SQLITE_FUNCTION}() IS NOT 1
        BEGIN SELECT RAISE(ABORT, '{REFUSAL}'); END
        """,
    )
]
_SQLITE_DROP = [f"DROP TRIGGER IF EXISTS {name}" for name in _SQLITE_TRIGGERS]


# --- The SQLite maintenance function -------------------------------------------------

_local = threading.local()


def _sqlite_maintenance_allowed() -> int:
    return 1 if getattr(_local, "depth", 0) > 0 else 0


@receiver(connection_created, dispatch_uid="audit.db.register_sqlite_function")
def _register_sqlite_function(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_function(SQLITE_FUNCTION, 0, _sqlite_maintenance_allowed)


# --- Maintenance exemption -------------------------------------------------------------


@contextmanager
def maintenance(using: str = "default") -> Iterator[None]:
    """Allow UPDATE/DELETE/TRUNCATE of audit rows on this connection for the block.

    Only for migrations, the test runner's flush and deliberate retention jobs. On
    PostgreSQL it works only for a role that is a member of the table's owner role;
    the runtime role is refused even inside this block. Nests safely.
    """
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SET {MAINTENANCE_SETTING} = 'on'")
        try:
            yield
        finally:
            _reset_pg_setting(connection)
    else:
        _local.depth = getattr(_local, "depth", 0) + 1
        try:
            yield
        finally:
            _local.depth -= 1


def _reset_pg_setting(connection: BaseDatabaseWrapper) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"RESET {MAINTENANCE_SETTING}")
    except DatabaseError:
        # The SET was issued inside this now-aborted transaction, so rolling it
        # back undoes the SET too; outside a transaction the RESET cannot fail this way.
        if not connection.in_atomic_block:
            raise


# --- Installing and inspecting the triggers -----------------------------------------


def install_triggers(connection: BaseDatabaseWrapper) -> None:
    """(Re)create the append-only triggers on the audit table; idempotent."""
    _execute_all(connection, _PG_INSTALL if connection.vendor == "postgresql" else _SQLITE_INSTALL)


def drop_triggers(connection: BaseDatabaseWrapper) -> None:
    """Remove the append-only triggers (the reverse of install_triggers)."""
    _execute_all(connection, _PG_DROP if connection.vendor == "postgresql" else _SQLITE_DROP)


def _execute_all(connection: BaseDatabaseWrapper, statements: list[str]) -> None:
    if connection.vendor not in ("postgresql", "sqlite"):
        raise NotImplementedError(f"append-only triggers are not written for {connection.vendor}")
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def missing_audit_triggers(using: str = "default") -> list[str]:
    """Names of append-only triggers that are absent (or disabled, on PostgreSQL)."""
    connection = connections[using]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(%s) "
                "AND NOT tgisinternal AND tgenabled <> 'D'",
                [AUDIT_TABLE],
            )
            expected = _PG_TRIGGERS
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s",
                [AUDIT_TABLE],
            )
            expected = _SQLITE_TRIGGERS
        present = {row[0] for row in cursor.fetchall()}
    return [name for name in expected if name not in present]


def audit_triggers_present(using: str = "default") -> bool:
    """True when every append-only trigger exists (and is enabled) on the audit table."""
    return not missing_audit_triggers(using)
