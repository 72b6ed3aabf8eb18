"""The agent model is swappable (APPROVALS_AGENT_MODEL), as auth's user is: the approvals
app below names it only through the setting. Options only, nothing in the database.

Django's autodetector does not compare `swappable`, so this is written by hand: the
migration state then says what the model says (as auth's User carries it)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("agents", "0004_one_delivery_shape")]

    operations = [
        migrations.AlterModelOptions(
            name="agent",
            options={"ordering": ["name"], "swappable": "APPROVALS_AGENT_MODEL"},
        ),
    ]
