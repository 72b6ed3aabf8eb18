"""Who else must vouch for a Slack decision. The site registers checks here (the identity
provider's fresh user-info re-check, `controlplane.accounts.chat_recheck`); each returns ""
or the refusal shown to the presser, and a refusal means nothing is decided."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["IdentityCheck", "refusal", "register_identity_check"]

IdentityCheck = Callable[[Any], str]
_CHECKS: list[IdentityCheck] = []


def register_identity_check(check: IdentityCheck) -> IdentityCheck:
    if check not in _CHECKS:  # Django may call ready() twice
        _CHECKS.append(check)
    return check


def refusal(user: Any) -> str:
    """The first check's refusal of `user` deciding from chat now, or ""."""
    for check in _CHECKS:
        said = check(user)
        if said:
            return said
    return ""
