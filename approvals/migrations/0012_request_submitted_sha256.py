# The digest of what the agent submitted, which the signed decision document (v2) names.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0011_policyproposal_authority_kinds"),
    ]

    operations = [
        migrations.AddField(
            model_name="approvalrequest",
            name="submitted_sha256",
            field=models.CharField(
                blank=True, help_text="sha256 of the canonical bytes of what the agent submitted.", max_length=64
            ),
        ),
    ]
