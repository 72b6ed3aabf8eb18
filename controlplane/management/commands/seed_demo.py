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
from approvals.models import PolicyProposal, PolicyVersion
from approvals.people import Person
from approvals.permissions import AUDITORS, REVIEWERS, RISK_ADMINS
from approvals.policy import approve_proposal, save_rule, seed_policy

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


# What the demo agent's critical requests match (demo_agent.py): a demo-only rule.
DEMO_CRITICAL_RULE = {
    "name": "demo_wire_critical",
    "priority": 5,
    "action_type": "demo_wire_money",
    "risk_level": "critical",
    "required_approvals": 1,
}


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
        self._demo_critical_rule()
        owner, _ = User.objects.get_or_create(username="agent-owner")
        agent, created = Agent.objects.get_or_create(name="demo-agent", defaults={"owner": owner})
        if created:
            self._print_demo_token(agent)
        self.stdout.write(self.style.SUCCESS("Demo data ready."))

    def _demo_critical_rule(self) -> None:
        """The demo agent's wires are critical (a password step-up to approve), so a newcomer
        sees that level without writing a rule: risk-admin proposes it, risk-admin2 approves
        it, through the same four-eyes policy services as anyone (and the audit log)."""
        latest = PolicyVersion.objects.order_by("-number").first()
        if latest is None or any(rule.get("name") == DEMO_CRITICAL_RULE["name"] for rule in latest.rules):
            return
        User = get_user_model()
        author, second = (Person(User.objects.get(username=name)) for name in ("risk-admin", "risk-admin2"))
        outcome = save_rule(DEMO_CRITICAL_RULE, actor=author, note="Demo: wires are critical")
        if isinstance(outcome, PolicyProposal):
            approve_proposal(outcome.pk, actor=second, note="Demo: second pair of eyes")
        self.stdout.write(f"  rule {DEMO_CRITICAL_RULE['name']}: demo_wire_money is critical (step-up to approve)")

    def _print_demo_token(self, agent: Agent) -> None:
        """A bearer token for the demo agent, shown once (only its hash is stored)."""
        from agents.services import issue_token

        issued = issue_token(agent, label="demo (seed_demo)")
        self.stdout.write(f"  demo-agent  API token: {issued.secret}")
