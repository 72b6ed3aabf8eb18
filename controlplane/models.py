"""The site's own models (only identity bookkeeping: controlplane/accounts/models.py)."""

from .accounts.models import ProviderSession

__all__ = ["ProviderSession"]
