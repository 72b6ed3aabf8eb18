"""An agent's stop lives in one place, EmergencyStop: carry any stop still set on the
old `Agent.emergency_stop` column over before the agents app drops it.

The agent model is named by its setting (APPROVALS_AGENT_MODEL), never by the agents
app's label: this app sits below it. The agents app's migration that drops the column
depends on this one, so the column is still there when this runs."""

from django.conf import settings
from django.db import migrations
from django.utils import timezone


def carry_legacy_stops_over(apps, schema_editor):
    Agent = apps.get_model(settings.APPROVALS_AGENT_MODEL)
    EmergencyStop = apps.get_model("approvals", "EmergencyStop")
    if "emergency_stop" not in {field.name for field in Agent._meta.get_fields()}:
        return  # an agent model that never had the old column has no stop to carry over
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
        migrations.swappable_dependency(settings.APPROVALS_AGENT_MODEL),
    ]

    operations = [migrations.RunPython(carry_legacy_stops_over, migrations.RunPython.noop)]
