"""Checks for URLs the server will call (agent callbacks, the webhook executor,
notification webhooks).

A URL must match the admin-managed allow-list (`OUTBOUND_URL_ALLOWLIST`: URL
prefixes such as ``https://hooks.example.com/agent/`` or host patterns such as
``example.com`` / ``*.example.com``), use http(s), carry no credentials, and
resolve only to public addresses: private, loopback, link-local and other
special ranges are refused unless `OUTBOUND_ALLOW_PRIVATE` is on. Callers must
also not follow redirects (a redirect could lead anywhere); `post_json` below
does the request that way. Check again right before each request: DNS answers
change between submission and delivery.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from .codes import register

__all__ = ["OUTBOUND_CODES", "OutboundURLRefused", "check_outbound_url", "is_allowed_address"]

URL_INVALID = register("outbound_url_invalid", 422, "The URL is not an http(s) URL the server may call.")
URL_NOT_ALLOWED = register("outbound_url_not_allowed", 422, "The URL's host is not on the outbound allow-list.")
URL_PRIVATE = register("outbound_url_private", 422, "The URL resolves to a private, loopback or link-local address.")
URL_UNRESOLVABLE = register("outbound_url_unresolvable", 422, "The URL's host does not resolve.")
OUTBOUND_CODES = (URL_INVALID, URL_NOT_ALLOWED, URL_PRIVATE, URL_UNRESOLVABLE)


class OutboundURLRefused(ValueError):
    """The URL may not be called. `code` is stable for API clients."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _allowlisted(url: str, host: str, allowlist: list[str]) -> bool:
    for entry in allowlist:
        entry = entry.strip()
        if not entry:
            continue
        if "://" in entry:
            if url.startswith(entry):
                return True
        elif fnmatch.fnmatchcase(host, entry.lower()):
            return True
    return False


def is_allowed_address(address: str, *, allow_private: bool) -> bool:
    """Is `address` one the server may connect to? Public unicast only, unless private is allowed."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return False
    if ip.is_private or ip.is_loopback or ip.is_link_local or not ip.is_global:
        return allow_private
    return True


def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise OutboundURLRefused(URL_UNRESOLVABLE, f"The host {host!r} does not resolve: {exc}.") from None
    return sorted({info[4][0] for info in infos})


def check_outbound_url(url: str, *, resolve: bool = True, **overrides: Any) -> str:
    """Return `url` if the server may call it, else raise OutboundURLRefused.

    `overrides` (allowlist=..., allow_private=...) replace the settings, for tests
    and for callers with their own list.
    """
    allowlist = overrides.get("allowlist", settings.OUTBOUND_URL_ALLOWLIST)
    allow_private = overrides.get("allow_private", settings.OUTBOUND_ALLOW_PRIVATE)
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise OutboundURLRefused(URL_INVALID, "The URL is not valid.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OutboundURLRefused(URL_INVALID, "Only http and https URLs with a host can be called.")
    if parts.username or parts.password:
        raise OutboundURLRefused(URL_INVALID, "URLs with credentials in them are refused.")
    host = parts.hostname.lower()
    if not _allowlisted(url, host, list(allowlist)):
        raise OutboundURLRefused(
            URL_NOT_ALLOWED, f"{host} is not on the outbound allow-list (OUTBOUND_URL_ALLOWLIST)."
        )
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    addresses = [str(literal)] if literal is not None else (_resolve(host, port) if resolve else [])
    for address in addresses:
        if not is_allowed_address(address, allow_private=allow_private):
            raise OutboundURLRefused(
                URL_PRIVATE,
                f"{host} resolves to {address}, a private, loopback or link-local address; those are refused.",
            )
    return url
