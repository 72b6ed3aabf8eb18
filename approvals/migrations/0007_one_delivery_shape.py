"""Notifications take the one delivery-record shape (approvals.models.deliveries): the
status is read from `delivered_at` / `gave_up_at` instead of being stored beside them."""

from django.db import migrations, models
from django.db.models import F


def status_to_times(apps, schema_editor) -> None:
    Notification = apps.get_model("approvals", "Notification")
    # A notification given up on keeps when it was last tried, its creation at worst.
    Notification.objects.filter(status="failed", gave_up_at=None).update(gave_up_at=F("created_at"))


def times_to_status(apps, schema_editor) -> None:
    Notification = apps.get_model("approvals", "Notification")
    Notification.objects.exclude(delivered_at=None).update(status="sent")
    Notification.objects.exclude(gave_up_at=None).update(status="failed")


class Migration(migrations.Migration):
    dependencies = [("approvals", "0006_agent_stops_are_emergency_stop_rows")]

    operations = [
        migrations.RenameField("notification", "sent_at", "delivered_at"),
        migrations.AddField("notification", "gave_up_at", models.DateTimeField(blank=True, null=True)),
        migrations.AddField(
            "notification",
            "last_status",
            models.PositiveSmallIntegerField(blank=True, null=True, help_text="The last HTTP status, if any."),
        ),
        migrations.RunPython(status_to_times, times_to_status),
        migrations.RemoveIndex("notification", "notification_due"),
        migrations.RemoveField("notification", "status"),
        migrations.AlterField(
            "notification",
            "destination",
            models.CharField(max_length=2000, help_text="The URL posted to, or the group emailed."),
        ),
        migrations.AlterField(
            "notification", "next_attempt_at", models.DateTimeField(blank=True, db_index=True, null=True)
        ),
        migrations.AddField("deliveryattempt", "duration_ms", models.PositiveIntegerField(default=0)),
        migrations.AlterField("deliveryattempt", "succeeded", models.BooleanField(default=False)),
    ]
