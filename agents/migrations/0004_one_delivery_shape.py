"""Callback deliveries take the one delivery-record shape (approvals.models.deliveries)."""

from django.db import migrations, models


def mark_succeeded(apps, schema_editor) -> None:
    CallbackAttempt = apps.get_model("agents", "CallbackAttempt")
    CallbackAttempt.objects.filter(error="", status_code__gte=200, status_code__lt=300).update(succeeded=True)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0003_one_place_for_an_agents_stop"),
        ("approvals", "0007_one_delivery_shape"),
    ]

    operations = [
        migrations.RenameField("callbackdelivery", "url", "destination"),
        migrations.AlterField(
            "callbackdelivery",
            "destination",
            models.CharField(max_length=2000, help_text="The URL posted to, or the group emailed."),
        ),
        migrations.AlterField(
            "callbackdelivery",
            "payload",
            models.JSONField(help_text="What is sent; masked params are already masked."),
        ),
        migrations.AlterField(
            "callbackdelivery",
            "last_status",
            models.PositiveSmallIntegerField(blank=True, null=True, help_text="The last HTTP status, if any."),
        ),
        migrations.AddField("callbackattempt", "succeeded", models.BooleanField(default=False)),
        migrations.AddField(
            "callbackattempt",
            "next_attempt_at",
            models.DateTimeField(blank=True, null=True, help_text="When the next try is due; empty if none."),
        ),
        migrations.RunPython(mark_succeeded, migrations.RunPython.noop),
    ]
