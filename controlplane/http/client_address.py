"""The address a request came from, for throttling and audit digests.

Behind a reverse proxy every request arrives from the proxy, so keying sign-in
throttling on REMOTE_ADDR alone would let five bad attempts lock a named reviewer
out for everyone. X-Forwarded-For, though, is whatever the client wrote, unless a
proxy we trust rewrote it. So the header is read only when the peer is listed in
`TRUSTED_PROXIES` (addresses or networks), and walked from the right: each trusted
hop is skipped, and the first address a trusted hop vouches for is the client.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings

__all__ = ["client_address"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _parsed(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(address)
    except ValueError:
        return None


def _trusted(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
    return ip is not None and any(ip in network for network in _networks(tuple(settings.TRUSTED_PROXIES)))


def client_address(request) -> str:
    """The client's address; empty when unknown (no request, or no peer address)."""
    if request is None:
        return ""
    peer = str(request.META.get("REMOTE_ADDR") or "")
    if not _trusted(_parsed(peer)):
        return peer
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    for hop in reversed(hops):
        ip = _parsed(hop)
        if ip is None:
            return peer  # a garbled header: fall back to what the socket says
        if not _trusted(ip):
            return hop
    return peer
