"""The log is append-only in Python and in the database; only maintenance() may edit it."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from audit.chain import Actor, record
from audit.db import maintenance, missing_audit_triggers
from audit.models import AppendOnlyError, AuditEvent

TABLE = AuditEvent._meta.db_table


@pytest.fixture
def logged(system) -> AuditEvent:
    record("policy.changed", actor=system, metadata={"rule": "mail-external"})
    record("emergency_stop.changed", actor=system, metadata={"on": True})
    return AuditEvent.objects.get(seq=1)


def run_sql(sql: str) -> None:
    # A savepoint, so the refused statement does not poison the test's transaction.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)


# --- In Python ----------------------------------------------------------------------


@pytest.mark.django_db
def test_saving_an_existing_event_is_refused(logged):
    logged.metadata = {"rule": "something-else"}
    with pytest.raises(AppendOnlyError):
        logged.save()
    assert AuditEvent.objects.get(seq=1).metadata == {"rule": "mail-external"}


@pytest.mark.django_db
def test_deleting_an_event_is_refused(logged):
    with pytest.raises(AppendOnlyError):
        logged.delete()
    assert AuditEvent.objects.count() == 2


@pytest.mark.django_db
def test_queryset_update_and_delete_are_refused(logged):
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(seq=1).update(actor_label="mallory")
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.bulk_update([logged], ["actor_label"])
    assert AuditEvent.objects.count() == 2


@pytest.mark.django_db
def test_events_cannot_be_added_off_the_chain(system):
    with pytest.raises(AppendOnlyError):
        AuditEvent(seq=1, verb="policy.changed", actor_kind="system", actor_label="x").save()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.bulk_create([AuditEvent(seq=1, verb="policy.changed")])
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.create(seq=1, verb="policy.changed")
    assert not AuditEvent.objects.exists()


# --- In the database -------------------------------------------------------------------


@pytest.mark.django_db
def test_the_triggers_exist_after_all_migrations():
    assert missing_audit_triggers() == []


@pytest.mark.django_db
def test_raw_update_is_refused(logged):
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql(f"UPDATE {TABLE} SET actor_label = 'mallory'")
    assert AuditEvent.objects.get(seq=1).actor_label == "system"


@pytest.mark.django_db
def test_raw_delete_is_refused(logged):
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql(f"DELETE FROM {TABLE}")
    assert AuditEvent.objects.count() == 2


@pytest.mark.django_db
def test_truncate_is_refused(require_postgres, logged):
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql(f"TRUNCATE {TABLE}")
    assert AuditEvent.objects.count() == 2


@pytest.mark.django_db
def test_maintenance_allows_raw_edits_and_ends_with_the_block(logged):
    with maintenance():
        run_sql(f"UPDATE {TABLE} SET actor_label = 'retention-job' WHERE seq = 1")
    assert AuditEvent.objects.get(seq=1).actor_label == "retention-job"
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql(f"UPDATE {TABLE} SET actor_label = 'again' WHERE seq = 1")


@pytest.mark.django_db
def test_setting_the_guc_by_hand_is_enough_only_for_the_owner(require_postgres, logged):
    # The test database is owned by the role the tests run as, so this is the
    # migration path; the next test shows the runtime role cannot do the same.
    with connection.cursor() as cursor:
        cursor.execute("SET controlplane.audit_maintenance = 'on'")
        try:
            run_sql(f"UPDATE {TABLE} SET actor_label = 'owner' WHERE seq = 1")
        finally:
            cursor.execute("RESET controlplane.audit_maintenance")
    assert AuditEvent.objects.get(seq=1).actor_label == "owner"


RUNTIME_ROLE = "cp_runtime_test"


def _drop_runtime_role(cursor) -> None:
    cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [RUNTIME_ROLE])
    if cursor.fetchone():
        cursor.execute(f"DROP OWNED BY {RUNTIME_ROLE}")
        cursor.execute(f"DROP ROLE {RUNTIME_ROLE}")


@pytest.fixture
def runtime_role_connection(require_postgres):
    """A psycopg connection as a non-owner role with full DML grants on the audit table."""
    import psycopg

    settings = connection.settings_dict
    with connection.cursor() as cursor:
        _drop_runtime_role(cursor)
        cursor.execute(f"CREATE ROLE {RUNTIME_ROLE} LOGIN")
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {RUNTIME_ROLE}")
        cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON {TABLE} TO {RUNTIME_ROLE}")
    runtime = psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        dbname=settings["NAME"],
        user=RUNTIME_ROLE,
        autocommit=True,
    )
    try:
        yield runtime
    finally:
        runtime.close()
        with connection.cursor() as cursor:
            _drop_runtime_role(cursor)


@pytest.mark.django_db(transaction=True)
def test_the_runtime_role_cannot_edit_even_with_the_maintenance_setting(runtime_role_connection, logged):
    import psycopg

    runtime = runtime_role_connection
    runtime.execute("SET controlplane.audit_maintenance = 'on'")
    assert runtime.execute(f"SELECT count(*) FROM {TABLE}").fetchone() == (2,)
    for statement in (
        f"UPDATE {TABLE} SET actor_label = 'mallory'",
        f"DELETE FROM {TABLE}",
        f"TRUNCATE {TABLE}",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            runtime.execute(statement)
    assert list(AuditEvent.objects.values_list("actor_label", flat=True)) == ["system", "system"]


@pytest.mark.django_db(transaction=True)
def test_a_sqlite_connection_without_the_maintenance_function_is_refused(logged):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: the refusal comes from the missing SQL function")
    import sqlite3

    outside = sqlite3.connect(connection.settings_dict["NAME"], timeout=5)
    try:
        for statement in (f"UPDATE {TABLE} SET actor_label = 'mallory'", f"DELETE FROM {TABLE}"):
            with pytest.raises(sqlite3.OperationalError, match="audit_maintenance_allowed"):
                outside.execute(statement)
    finally:
        outside.close()
    assert AuditEvent.objects.count() == 2


# --- flush for transactional tests ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_flush_empties_the_log_through_the_maintenance_path(logged):
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0, inhibit_post_migrate=True)
    assert not AuditEvent.objects.exists()
    record("policy.changed", actor=Actor.system())
    assert AuditEvent.objects.get().seq == 1


@pytest.mark.django_db(transaction=True)
def test_djangos_own_flush_is_refused_by_the_triggers(logged):
    from django.core.management import CommandError, call_command
    from django.core.management.commands.flush import Command as CoreFlush

    with pytest.raises(CommandError):
        call_command(CoreFlush(), interactive=False, verbosity=0)
    assert AuditEvent.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_flush_run_again_when_a_process_still_reading_deadlocks_it(logged):
    """A live server still answering a request reads one table and then another while the
    flush waits to lock them all: PostgreSQL aborts the flush as a deadlock, and the flush
    is run again once the reader is done, instead of failing the next test's setup."""
    import re
    import threading
    import time

    import psycopg
    from django.core.management import call_command
    from django.core.management.color import no_style
    from django.core.management.sql import sql_flush
    from django.db import connections

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite has no table locks to deadlock on")
    truncate = next(sql for sql in sql_flush(no_style(), connection) if sql.startswith("TRUNCATE"))
    tables = re.findall(r'"([^"]+)"', truncate)
    first, last = tables[0], tables[-1]
    settings = connection.settings_dict
    address = {"dbname": settings["NAME"], "user": settings["USER"], "host": settings["HOST"], "port": settings["PORT"]}
    reader = psycopg.connect(**address)
    # pg_stat_activity is read once per transaction, so the watching is done outside the reader's.
    watcher = psycopg.connect(**address, autocommit=True)
    # The reader outwaits the flush, so the flush is the one PostgreSQL aborts.
    reader.execute("SET deadlock_timeout = '30s'")
    reader.execute(f'SELECT 1 FROM "{last}" LIMIT 1')  # holds a share lock on the last table
    failures: list[BaseException] = []

    def flush_in_another_connection() -> None:
        try:
            call_command("flush", interactive=False, verbosity=0, inhibit_post_migrate=True)
        except BaseException as error:  # reported to the test below
            failures.append(error)
        finally:
            connections.close_all()

    flusher = threading.Thread(target=flush_in_another_connection)
    flusher.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the flush holds the first table and waits for the last
        waiting = watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'TRUNCATE%%'"
        ).fetchone()
        if waiting and waiting[0]:
            break
        time.sleep(0.01)
    reader.execute(f'SELECT 1 FROM "{first}" LIMIT 1')  # waits for the flush: a deadlock
    reader.commit()
    reader.close()
    watcher.close()
    flusher.join(timeout=30)

    assert not flusher.is_alive() and failures == []
    assert not AuditEvent.objects.exists()
