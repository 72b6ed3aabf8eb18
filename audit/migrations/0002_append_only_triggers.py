"""Install the database triggers that make the audit table append-only.

See audit.db: on SQLite, a later migration that alters this table rebuilds it and
drops these triggers, so it must call `install_triggers` again.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

from audit.db import drop_triggers, install_triggers


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    install_triggers(schema_editor.connection)


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    drop_triggers(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
