"""Step-up by signing in again at the identity provider (the browser half).

`approvals.services.provider_step_up` issues a challenge for a set of decisions; this
sends the reviewer to their provider with `prompt=login` and `max_age=0` (so it must ask
them again, and say when in `auth_time`), takes them back, and believes the answer only
from an ID token that verifies: signed by the provider's key, for our client, with the
nonce of this round trip (so a token from another sign-in cannot be replayed here) and
the reviewer's own `sub`. The token's `auth_time` goes to the service, which accepts it
only if it is after the challenge and recent.

allauth's own provider login is not used: it would sign the person in again (a new
session, group mapping), where this only proves presence for one decision.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any
from urllib.parse import urlencode

import requests
from allauth.socialaccount.internal import jwtkit
from allauth.socialaccount.models import SocialAccount, SocialApp
from allauth.socialaccount.providers.oauth2.client import OAuth2Error
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from approvals.services import provider_step_up
from audit.chain import Actor, record

from .token_endpoint import post_to_token_endpoint

__all__ = ["callback", "done", "start", "status"]

logger = logging.getLogger(__name__)

SESSION_KEY = "_provider_step_up"
_KEPT_ROUND_TRIPS = 5  # a few tabs at once; older ones are dropped


def _refusal(message: str, status: int = 400) -> HttpResponse:
    # Plain text: nothing of the request is echoed into markup.
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def _account(user: Any) -> SocialAccount | None:
    return SocialAccount.objects.filter(user_id=user.pk).order_by("pk").first()


def _callback_url(request: HttpRequest) -> str:
    return request.build_absolute_uri(reverse("provider-step-up-callback"))


@never_cache
@require_GET
def start(request: HttpRequest, nonce: str) -> HttpResponse:
    """Send the reviewer to their provider to prove the challenge `nonce`."""
    user = request.user
    if not user.is_authenticated:
        return HttpResponseRedirect(reverse("login"))
    account = _account(user)
    if account is None or not provider_step_up.pending(user, nonce):
        return _refusal("This confirmation has expired or was already used; start the decision again.")
    try:
        adapter = OpenIDConnectOAuth2Adapter(request, account.provider)
        app = adapter.get_provider().app
        authorize_url = adapter.authorize_url
    except SocialApp.DoesNotExist:
        return _refusal("Your identity provider is no longer configured here.", status=409)
    except (requests.RequestException, ValueError, KeyError):
        logger.warning("provider step-up: %s unreachable", account.provider, exc_info=True)
        return _refusal("Your identity provider cannot be reached; try again.", status=503)
    state, oidc_nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    next_url = request.GET.get("next", "")
    trips = dict(list(request.session.get(SESSION_KEY, {}).items())[-(_KEPT_ROUND_TRIPS - 1) :])
    trips[state] = {"nonce": nonce, "oidc_nonce": oidc_nonce, "provider": account.provider, "next": next_url}
    request.session[SESSION_KEY] = trips
    query = urlencode(
        {
            "response_type": "code",
            "client_id": app.client_id,
            "redirect_uri": _callback_url(request),
            "scope": "openid",
            "state": state,
            "nonce": oidc_nonce,
            # Ask again whatever session the provider has, and say when it asked.
            "prompt": "login",
            "max_age": "0",
            "login_hint": account.uid,
        }
    )
    return HttpResponseRedirect(f"{authorize_url}?{query}")


def _id_token(request: HttpRequest, adapter: OpenIDConnectOAuth2Adapter, code: str) -> dict[str, Any]:
    """The verified claims of the ID token the provider gives for `code`."""
    response = post_to_token_endpoint(
        adapter, {"grant_type": "authorization_code", "code": code, "redirect_uri": _callback_url(request)}
    )
    response.raise_for_status()
    config = adapter.openid_config
    return jwtkit.verify_and_decode(
        credential=response.json()["id_token"],
        keys_url=config["jwks_uri"],
        issuer=config["issuer"],
        audience=adapter.get_provider().app.client_id,
        lookup_kid=jwtkit.lookup_kid_jwk,
    )


@never_cache
@require_GET
def callback(request: HttpRequest) -> HttpResponse:
    """Where the provider sends the reviewer back: prove the challenge, or say why not."""
    user = request.user
    if not user.is_authenticated:
        return HttpResponseRedirect(reverse("login"))
    trips = request.session.get(SESSION_KEY, {})
    trip = trips.pop(request.GET.get("state", ""), None)
    request.session[SESSION_KEY] = trips
    if trip is None:
        return _refusal("This sign-in was not started here (or was already used).")
    code = request.GET.get("code", "")
    if not code:
        return _refusal("Your identity provider did not confirm the sign-in.", status=403)
    account = _account(user)
    try:
        adapter = OpenIDConnectOAuth2Adapter(request, trip["provider"])
        claims = _id_token(request, adapter, code)
    except SocialApp.DoesNotExist:
        return _refusal("Your identity provider is no longer configured here.", status=409)
    except (requests.RequestException, ValueError, KeyError, OAuth2Error) as error:
        logger.warning("provider step-up: no valid ID token from %s: %s", trip["provider"], error)
        return _failed(user, trip, "invalid_id_token")
    if not secrets.compare_digest(str(claims.get("nonce", "")), trip["oidc_nonce"]):
        return _failed(user, trip, "wrong_nonce")
    if account is None or account.provider != trip["provider"] or str(claims.get("sub")) != account.uid:
        return _failed(user, trip, "another_person")
    if not provider_step_up.record_reauthentication(
        user, trip["nonce"], provider=trip["provider"], auth_time=claims.get("auth_time")
    ):
        return _failed(user, trip, "not_fresh")
    next_url = trip["next"]
    if not url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        next_url = "/"
    return HttpResponseRedirect(next_url)


def _failed(user: Any, trip: dict[str, Any], reason: str) -> HttpResponse:
    record(
        "auth.step_up_failed",
        actor=Actor.for_user(user),
        metadata={"method": "provider", "provider": trip["provider"], "reason": reason},
    )
    return _refusal(
        "Your identity provider did not confirm a fresh sign-in for this decision; start it again.", status=403
    )


@never_cache
@require_GET
def status(request: HttpRequest, nonce: str) -> JsonResponse:
    """Whether the challenge is proven yet: the deciding page polls this while the
    provider's window is open (the window cannot tell it: the pages' opener policy
    severs a window that went to another origin)."""
    if not request.user.is_authenticated:
        return JsonResponse({"code": "not_authenticated", "message": "Sign in first."}, status=401)
    return JsonResponse(
        {
            "proven": provider_step_up.proven(request.user, nonce),
            "pending": provider_step_up.pending(request.user, nonce),
        }
    )


@never_cache
@require_GET
def done(request: HttpRequest) -> HttpResponse:
    """The end of the round trip, in the provider's window."""
    return render(request, "account/provider_step_up_done.html")
