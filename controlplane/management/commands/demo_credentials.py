"""`manage.py demo_credentials`: new passwords for the demo people of `make run`, printed.

Only password hashes are stored, so a password printed once by `seed_demo` cannot be
shown again: this sets new ones and prints those (anyone signed in keeps their session
until it next checks the password). Refused outside the embedded demo (with REDIS_URL
set this is a real deployment, whose people are not the demo's), and for a demo person
who does not exist yet (`make run` seeds them).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from .seed_demo import DEMO_PEOPLE, credential_line


class Command(BaseCommand):
    help = "Reset and print the demo people's passwords (the embedded `make run` demo only)."

    def handle(self, *args, **options) -> None:
        if settings.REDIS_URL:
            raise CommandError(
                "demo_credentials resets the embedded demo's passwords only; this is a Redis deployment "
                "(REDIS_URL is set): reset a person's password with `manage.py changepassword`."
            )
        User = get_user_model()
        found = {user.get_username(): user for user in User.objects.filter(username__in=[p[0] for p in DEMO_PEOPLE])}
        if not found:
            raise CommandError("No demo people here yet: `make run` creates them (manage.py seed_demo).")
        self.stdout.write("New demo passwords (the old ones no longer work):")
        for username, group_name, _ in DEMO_PEOPLE:
            if username in found:
                self.stdout.write(credential_line(found[username], group_name))
        self.stdout.write("Sign in at /login/ as `reviewer` for the queue.")
