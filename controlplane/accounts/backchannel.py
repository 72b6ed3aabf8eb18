"""OpenID Connect back-channel logout: the provider tells us someone signed out there.

The provider POSTs a `logout_token` (a signed JWT, OpenID Connect Back-Channel Logout
1.0) to `/accounts/oidc/<provider>/backchannel-logout/`. It is believed only when
`validate_logout_token` accepts it: signed by a key of the provider's JWKS with an
asymmetric algorithm (never `none`, never an HMAC keyed by something public), our
client id in `aud`, the provider's issuer in `iss`, issued within
`LOGOUT_TOKEN_MAX_AGE_SECONDS`, carrying the back-channel logout event, a `sid` or a
`sub`, no `nonce` (so an ID token cannot pass for one), and a `jti` seen once (a
replayed token ends nothing twice, and cannot be kept to end a later session).

Then the sessions it names end at once (`provider_sessions.end_sessions`): the one
sign-in a `sid` names, else every session of the `sub`. The answer follows the spec:
200 when accepted (also when nothing was signed in), 400 with a JSON `error` when not.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

import jwt
import requests
from allauth.socialaccount.adapter import get_adapter
from allauth.socialaccount.models import SocialApp
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter
from django.core.cache import cache
from django.db.models import Q
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from . import provider_sessions
from .models import ProviderSession

__all__ = ["BACKCHANNEL_LOGOUT_EVENT", "InvalidLogoutToken", "backchannel_logout", "validate_logout_token"]

logger = logging.getLogger(__name__)

BACKCHANNEL_LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"
# A logout token is delivered as it is made; an older one is refused (and its jti need
# only be remembered this long).
LOGOUT_TOKEN_MAX_AGE_SECONDS = 120
CLOCK_SKEW_SECONDS = 30
# Asymmetric only: an HMAC would be keyed by the client secret, which the provider's
# JWKS cannot vouch for, and `none` vouches for nothing.
ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"})


class InvalidLogoutToken(Exception):
    """Why a logout token was refused (said to the provider, never to a person)."""


def _signing_key(jwks: dict[str, Any], header: dict[str, Any]) -> Any:
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise InvalidLogoutToken(f"algorithm {alg!r} is not accepted")
    kid = header.get("kid")
    candidates = [key for key in jwks.get("keys") or [] if isinstance(key, dict) and key.get("use", "sig") == "sig"]
    if kid is not None:
        candidates = [key for key in candidates if key.get("kid") == kid]
    elif len(candidates) != 1:  # without a kid only an unambiguous key will do
        candidates = []
    for key in candidates:
        try:
            return jwt.PyJWK(key, algorithm=alg).key
        except jwt.PyJWTError:
            continue
    raise InvalidLogoutToken("no key of the provider's JWKS verifies this token")


def validate_logout_token(
    token: str, *, issuer: str, client_id: str, jwks: dict[str, Any], now: float | None = None
) -> dict[str, Any]:
    """The claims of a logout token that passes every check above; InvalidLogoutToken otherwise.
    The jti is spent by the caller (`_spend_jti`), once the token is known to be the provider's."""
    try:
        header = jwt.get_unverified_header(token)
        key = _signing_key(jwks, header)
        claims = jwt.decode(
            token,
            key,
            algorithms=[header["alg"]],
            audience=client_id,
            issuer=issuer,
            leeway=CLOCK_SKEW_SECONDS,
            options={"require": ["iss", "aud", "iat", "jti"]},
        )
    except jwt.PyJWTError as error:
        raise InvalidLogoutToken(str(error)) from None
    now = time.time() if now is None else now
    if now - int(claims["iat"]) > LOGOUT_TOKEN_MAX_AGE_SECONDS + CLOCK_SKEW_SECONDS:
        raise InvalidLogoutToken("the token is too old")
    events = claims.get("events")
    if not isinstance(events, dict) or not isinstance(events.get(BACKCHANNEL_LOGOUT_EVENT), dict):
        raise InvalidLogoutToken("the back-channel logout event is missing")
    if "nonce" in claims:
        raise InvalidLogoutToken("a logout token carries no nonce")
    if not (isinstance(claims.get("sid"), str) and claims["sid"]) and not (
        isinstance(claims.get("sub"), str) and claims["sub"]
    ):
        raise InvalidLogoutToken("neither sid nor sub")
    if not isinstance(claims["jti"], str) or not claims["jti"]:
        raise InvalidLogoutToken("jti must be a string")
    return claims


def _spend_jti(provider: str, jti: str) -> bool:
    """True the first time this provider's jti is seen within the token's lifetime."""
    key = f"backchannel-jti:{provider}:{hashlib.sha256(jti.encode()).hexdigest()}"
    return cache.add(key, 1, timeout=LOGOUT_TOKEN_MAX_AGE_SECONDS + 2 * CLOCK_SKEW_SECONDS)


def sessions_named(provider: str, claims: dict[str, Any]) -> Any:
    """The sessions a logout token names: the sign-in with its `sid` (and, for the same
    `sub`, those whose sign-in carried no sid, which cannot be told apart); all of the
    `sub`'s sessions when it names no sid."""
    sid, sub = claims.get("sid") or "", claims.get("sub") or ""
    sessions = ProviderSession.objects.filter(provider=provider).select_related("user")
    if not sid:
        return sessions.filter(sub=sub)
    named = Q(sid=sid) | Q(sub=sub, sid="") if sub else Q(sid=sid)
    found = sessions.filter(named)
    return found.filter(sub=sub) if sub else found


JWKS_CACHE_SECONDS = 300


def _provider_keys(request: HttpRequest, provider_id: str, *, kid: str | None) -> tuple[str, str, dict[str, Any]]:
    """(issuer, client id, JWKS) of a configured provider, from its discovery document.
    Kept for JWKS_CACHE_SECONDS, so refused tokens cannot make us fetch them again and
    again; fetched anew when the token names a key id we do not have (a rotation)."""
    adapter = OpenIDConnectOAuth2Adapter(request, provider_id)
    provider = adapter.get_provider()
    client_id = provider.app.client_id
    # Keyed by where the provider is, so a changed configuration never meets old keys.
    cache_key = f"backchannel-keys:{hashlib.sha256(provider.server_url.encode()).hexdigest()}"
    kept = cache.get(cache_key)
    if kept and (kid is None or any(key.get("kid") == kid for key in kept["jwks"].get("keys") or [])):
        return kept["issuer"], client_id, kept["jwks"]
    config = adapter.openid_config
    with get_adapter().get_requests_session() as session:
        response = session.get(config["jwks_uri"])
        response.raise_for_status()
        jwks = response.json()
    if not isinstance(jwks, dict):
        raise ValueError("the JWKS is not an object")
    cache.set(cache_key, {"issuer": config["issuer"], "jwks": jwks}, timeout=JWKS_CACHE_SECONDS)
    return config["issuer"], client_id, jwks


def _refuse(description: str, status: int = 400, error: str = "invalid_request") -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


@csrf_exempt  # the provider's server calls this, with no cookie; the token's signature is the proof
@never_cache
@require_POST
def backchannel_logout(request: HttpRequest, provider_id: str) -> JsonResponse:
    token = request.POST.get("logout_token", "")
    if not token:
        return _refuse("logout_token is missing")
    try:
        OpenIDConnectOAuth2Adapter(request, provider_id).get_provider()
    except SocialApp.DoesNotExist:
        return _refuse("no such provider", status=404, error="not_found")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as error:  # not even a JWT: refused before asking the provider anything
        return _refuse(f"logout_token refused: {error}")
    try:
        issuer, client_id, jwks = _provider_keys(request, provider_id, kid=header.get("kid"))
    except (requests.RequestException, ValueError, KeyError):
        logger.warning("back-channel logout: could not read the keys of provider %s", provider_id, exc_info=True)
        return _refuse("the provider's keys could not be read; try again", status=503, error="temporarily_unavailable")
    try:
        claims = validate_logout_token(token, issuer=issuer, client_id=client_id, jwks=jwks)
    except InvalidLogoutToken as refusal:
        logger.warning("back-channel logout from %s refused: %s", provider_id, refusal)
        return _refuse(f"logout_token refused: {refusal}")
    if not _spend_jti(provider_id, claims["jti"]):
        logger.warning("back-channel logout from %s refused: jti replayed", provider_id)
        return _refuse("logout_token refused: already used")
    ended = provider_sessions.end_sessions(
        sessions_named(provider_id, claims),
        provider=provider_id,
        reason="backchannel_logout",
        details={"sid_given": bool(claims.get("sid")), "sub_given": bool(claims.get("sub"))},
    )
    logger.info("back-channel logout from %s ended %d session(s)", provider_id, ended)
    return JsonResponse({"sessions_ended": ended})
