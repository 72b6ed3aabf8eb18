"""`manage.py create_agent NAME [--owner USER] [--scopes submit read claim] [--expires-days N]`

Creates the agent if it does not exist and prints a new API token (shown once).
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agents.models import ALL_SCOPES
from agents.services import create_agent, issue_token


class Command(BaseCommand):
    help = "Create an agent (if needed) and print a new API token for it. The token is shown only once."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--owner", help="Username of the person accountable for the agent.")
        parser.add_argument("--scopes", nargs="+", choices=ALL_SCOPES, default=list(ALL_SCOPES))
        parser.add_argument("--expires-days", type=int, default=None, help="Token lifetime; default: no expiry.")
        parser.add_argument("--label", default="", help="A note on what the token is for.")

    def handle(
        self, *args, name: str, owner: str | None, scopes: list[str], expires_days: int | None, label: str, **options
    ) -> None:
        owner_user = None
        if owner:
            try:
                owner_user = get_user_model().objects.get_by_natural_key(owner)
            except get_user_model().DoesNotExist:
                raise CommandError(f"No user called {owner!r}.") from None
        if expires_days is not None and expires_days <= 0:
            raise CommandError("--expires-days must be positive.")
        agent, created = create_agent(name, owner=owner_user)
        if not created and owner_user is not None and agent.owner_id != owner_user.pk:
            raise CommandError(f"Agent {name!r} exists with another owner; change owners in the admin.")
        issued = issue_token(
            agent,
            scopes=scopes,
            label=label,
            expires_in=timedelta(days=expires_days) if expires_days else None,
        )
        if options["verbosity"] > 0:
            self.stderr.write(
                f"{'Created' if created else 'Using'} agent {agent.name!r}; new token with scopes "
                f"{', '.join(issued.token.scopes)}"
                + (f", expires {issued.token.expires_at:%Y-%m-%d %H:%M} UTC" if issued.token.expires_at else "")
                + ". Store it now; it is not shown again."
            )
            self.stderr.write(f"Callback signing secret: {agent.callback_secret}")
        self.stdout.write(issued.secret)
