# The reviewer queue's per-risk counts at 100k pending requests
# (approvals.web.queue_queries.queue_counts): a level with no pending requests is an empty
# index range instead of a walk over every pending row. The per-row permission probe
# needs no new index: guardian's unique (group, permission, object) index serves it
# once approvals.permissions passes the group ids as literals.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0003_rule_notifications"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="approvalrequest",
            index=models.Index(fields=["state", "risk_level", "decide_by"], name="request_state_risk_deadline"),
        ),
    ]
