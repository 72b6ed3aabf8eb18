"""Switch the emergency stop from a shell: global, or one agent's.

    python manage.py emergency_stop                    # global stop on
    python manage.py emergency_stop --off              # global stop off
    python manage.py emergency_stop --agent mail-bot   # that agent's stop on
    python manage.py emergency_stop --status           # show every switch

Audited as ``emergency_stop.changed`` with the system (or ``--as USERNAME``) as actor.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agents.models import Agent
from approvals.emergency import current_stop_state, set_emergency_stop
from approvals.people import Person


class Command(BaseCommand):
    help = "Switch the global or an agent's emergency stop on (default) or off."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--agent", help="Agent name; without it the global stop is switched.")
        parser.add_argument("--off", action="store_true", help="Lift the stop instead of setting it.")
        parser.add_argument("--reason", default="", help="Why (digested into the audit log, shown on the banner).")
        parser.add_argument("--as", dest="username", help="Record this user as the one who switched it.")
        parser.add_argument("--status", action="store_true", help="Only print the current state.")

    def handle(self, *args, agent=None, off=False, reason="", username=None, status=False, **options) -> None:
        if not status:
            target = None
            if agent:
                target = Agent.objects.filter(name=agent).first()
                if target is None:
                    raise CommandError(f"No agent named {agent!r}.")
            user = None
            if username:
                user = get_user_model().objects.filter(username=username).first()
                if user is None:
                    raise CommandError(f"No user named {username!r}.")
            changed = set_emergency_stop(on=not off, agent=target, actor=Person(user) if user else None, reason=reason)
            scope = f"agent {agent}" if agent else "global"
            verb = ("lifted" if off else "ON") if changed else ("already off" if off else "already on")
            self.stdout.write(f"Emergency stop ({scope}): {verb}.")
        state = current_stop_state()
        self.stdout.write(f"  global: {'ON' if state['global'] else 'off'}")
        for switch in state["agents"]:
            self.stdout.write(f"  agent {switch.agent_name}: ON")
