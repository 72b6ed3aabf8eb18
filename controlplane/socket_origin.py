"""The Origin check for browser sockets: scheme, host and port, as Django's CSRF
check compares them (channels' `AllowedHostsOriginValidator` compares host names
only, so any port of an allowed host passed: `http://localhost:9999` reached a
server on `localhost:8000`).

An Origin is accepted when it is exactly the server's own origin (the socket's
`Host` header, whose host must be in ALLOWED_HOSTS, with `https` when the socket
is secure, directly or per SECURE_PROXY_SSL_HEADER, else `http`) or matches an
entry of CSRF_TRUSTED_ORIGINS (``https://*.example.com`` allowed). A socket with
no Host header (not a browser) may only come from an allowed host on its
scheme's default port. No Origin, no socket.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

__all__ = ["SameOriginValidator", "origin_allowed"]

DEFAULT_PORTS = {"http": 80, "https": 443}


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def _parts(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin, or None if it is not a plain http(s) origin."""
    try:
        parsed = urlsplit(origin.strip().lower())
        port = parsed.port
    except ValueError:
        return None
    if (
        parsed.scheme not in DEFAULT_PORTS
        or not parsed.hostname
        or parsed.path not in ("", "/")
        or parsed.query
        or parsed.username is not None
    ):
        return None
    return parsed.scheme, parsed.hostname, port or DEFAULT_PORTS[parsed.scheme]


def _allowed_hosts() -> list[str]:
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]  # Django's own DEBUG default
    return list(settings.ALLOWED_HOSTS)


def _secure(scope: dict) -> bool:
    if scope.get("scheme") == "wss":
        return True
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, expected = proxy
        header = name.removeprefix("HTTP_").replace("_", "-").lower().encode()
        value = _header(scope, header)
        return value is not None and value.split(",")[0].strip() == expected
    return False


def _trusted(origin: tuple[str, str, int]) -> bool:
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        scheme, _, rest = entry.lower().partition("://")
        wildcard = rest.startswith("*.")
        trusted = _parts(f"{scheme}://{rest[2:] if wildcard else rest}")
        if trusted is None or (trusted[0], trusted[2]) != (origin[0], origin[2]):
            continue
        if trusted[1] == origin[1] or (wildcard and is_same_domain(origin[1], "." + trusted[1])):
            return True
    return False


def origin_allowed(scope: dict) -> bool:
    origin = _parts(_header(scope, b"origin") or "")
    if origin is None:
        return False
    if _trusted(origin):
        return True
    host = _header(scope, b"host")
    if host is None:
        return validate_host(origin[1], _allowed_hosts()) and origin[2] == DEFAULT_PORTS[origin[0]]
    domain, _ = split_domain_port(host)
    own = _parts(f"{'https' if _secure(scope) else 'http'}://{host}")
    return bool(domain) and validate_host(domain, _allowed_hosts()) and own == origin


class SameOriginValidator:
    """ASGI middleware: refuse (close) a WebSocket whose Origin is not allowed."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
