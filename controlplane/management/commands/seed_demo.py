"""Create the demo people, agent and seed policy for `make run`. Idempotent:
passwords are printed once, when the account is first created.

Four eyes on policy stays on in the demo (settings.POLICY_FOUR_EYES): risk-admin
proposes a change that is not provably stricter, risk-admin2 approves it.
"""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from agents.models import Agent
from approvals.permissions import AUDITORS, REVIEWERS, RISK_ADMINS
from approvals.policy import seed_policy

DEMO_PEOPLE = [
    ("reviewer", REVIEWERS, False),
    ("reviewer2", REVIEWERS, False),
    ("risk-admin", RISK_ADMINS, True),
    ("risk-admin2", RISK_ADMINS, True),  # the second pair of eyes on policy changes
    ("auditor", AUDITORS, False),
]


def credential_line(user, group_name: str) -> str:
    """Give `user` a new random password and say it (only its hash is stored)."""
    password = secrets.token_urlsafe(12)
    user.set_password(password)
    user.save(update_fields=["password"] if user.pk else None)
    return f"  {user.get_username():<11} password: {password}   ({group_name})"


class Command(BaseCommand):
    help = "Create demo users, a demo agent and the seed policy (idempotent)."

    def handle(self, *args, **options) -> None:
        seed_policy()
        User = get_user_model()
        for username, group_name, is_staff in DEMO_PEOPLE:
            user, created = User.objects.get_or_create(username=username, defaults={"is_staff": is_staff})
            user.groups.add(Group.objects.get(name=group_name))
            if created:
                self.stdout.write(credential_line(user, group_name))
        owner, _ = User.objects.get_or_create(username="agent-owner")
        agent, created = Agent.objects.get_or_create(name="demo-agent", defaults={"owner": owner})
        if created:
            self._print_demo_token(agent)
        self.stdout.write(self.style.SUCCESS("Demo data ready."))

    def _print_demo_token(self, agent: Agent) -> None:
        """A bearer token for the demo agent, shown once (only its hash is stored)."""
        from agents.services import issue_token

        issued = issue_token(agent, label="demo (seed_demo)")
        self.stdout.write(f"  demo-agent  API token: {issued.secret}")
