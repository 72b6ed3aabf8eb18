"""Sessions signed in through an identity provider, so the provider can end them.

Django's session store cannot be searched by person, and a back-channel logout names
a person (`sub`) or one of their sign-ins at the provider (`sid`), so each sign-in
through a provider leaves a row here naming its session. Back-channel logout and
the user-info re-check (`provider_sessions`) find the sessions to end through it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

__all__ = ["ProviderSession"]


class ProviderSession(models.Model):
    session_key = models.CharField(max_length=40, primary_key=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    provider = models.CharField(max_length=100, help_text="The provider's id (OIDC_PROVIDERS).")
    sub = models.CharField(max_length=255, help_text="The person's subject identifier at the provider.")
    sid = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="The provider's session id from the ID token, when it sends one.",
    )
    signed_in_at = models.DateTimeField(default=timezone.now)
    # When the provider last vouched for this person (sign-in, or a user-info re-check).
    checked_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "controlplane"
        indexes = [
            models.Index(fields=["provider", "sub"]),
            models.Index(fields=["provider", "sid"]),
            models.Index(fields=["checked_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.sub} ({self.session_key[:6]}...)"
