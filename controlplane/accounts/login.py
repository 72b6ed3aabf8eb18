"""The sign-in page: allauth's login view, telling the page whether passwords are on."""

from __future__ import annotations

from typing import Any

from allauth.account.views import LoginView as AllauthLoginView
from django.conf import settings

__all__ = ["LoginView"]


class LoginView(AllauthLoginView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "local_password_login": settings.LOCAL_PASSWORD_LOGIN}
