"""The Merkle tree over the audit events (audit.tree), built over the events already stored.

Creating a new table leaves the audit table (and its append-only triggers) untouched.
"""

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

from audit.tree import subtree_rows


def backfill(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    event_model = apps.get_model("audit", "AuditEvent")
    node_model = apps.get_model("audit", "AuditTreeNode")
    hashes = event_model.objects.order_by("seq").values_list("hash", flat=True).iterator(chunk_size=5000)
    batch = []
    for seq, stored in subtree_rows(hashes):
        batch.append(node_model(seq=seq, hashes=stored))
        if len(batch) == 5000:
            node_model.objects.bulk_create(batch)
            batch = []
    node_model.objects.bulk_create(batch)


class Migration(migrations.Migration):
    dependencies = [("audit", "0004_event_signatures")]

    operations = [
        migrations.CreateModel(
            name="AuditTreeNode",
            fields=[
                ("seq", models.BigIntegerField(primary_key=True, serialize=False)),
                ("hashes", models.TextField()),
            ],
            options={"ordering": ["seq"], "default_permissions": ("view",)},
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False),
    ]
