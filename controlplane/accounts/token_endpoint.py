"""One request to an OpenID provider's token endpoint, authenticated as our client the
way the provider's app is configured (HTTP Basic or form fields): the provider step-up
trades a code for an ID token here, the user-info re-check a refresh token for a new
access token."""

from __future__ import annotations

from typing import Any

import requests
from allauth.socialaccount.adapter import get_adapter
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter

__all__ = ["post_to_token_endpoint"]


def post_to_token_endpoint(adapter: OpenIDConnectOAuth2Adapter, form: dict[str, Any]) -> requests.Response:
    app = adapter.get_provider().app
    form = dict(form)
    auth = None
    if adapter.basic_auth:
        auth = (app.client_id, app.secret)
    else:
        form.update(client_id=app.client_id, client_secret=app.secret)
    with get_adapter().get_requests_session() as session:
        return session.post(adapter.access_token_url, data=form, auth=auth)
