"""An agent's stop lives in one place, EmergencyStop: carry any stop still set on the
old `Agent.emergency_stop` column over before the agents app drops it."""

from django.db import migrations
from django.utils import timezone


def carry_legacy_stops_over(apps, schema_editor):
    Agent = apps.get_model("agents", "Agent")
    EmergencyStop = apps.get_model("approvals", "EmergencyStop")
    for agent in Agent.objects.filter(emergency_stop=True):
        EmergencyStop.objects.update_or_create(
            scope=f"agent:{agent.pk}",
            defaults={
                "agent": agent,
                "on": True,
                "reason": "carried over from the agent's own flag",
                "changed_at": timezone.now(),
                "changed_by_label": "migration",
            },
        )


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0005_four_eyes_step_up_and_sent_action_type"),
        ("agents", "0002_tokens_callbacks"),
    ]

    operations = [migrations.RunPython(carry_legacy_stops_over, migrations.RunPython.noop)]
