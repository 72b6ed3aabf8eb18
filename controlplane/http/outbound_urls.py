"""The outbound URL policy `outbound.signed_post` checks every call against: the URL parsed
(never judged on its text), matched against the allow-list, and every address its host
resolves to judged public (the rules are in `controlplane.http.outbound`'s docstring).
`check_url` answers the checked `Target`, or refuses with `OutboundURLRefused`.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from .codes import register

URL_INVALID = register("outbound_url_invalid", 422, "The URL is not an http(s) URL the server may call.")
URL_NOT_ALLOWED = register("outbound_url_not_allowed", 422, "The URL's host is not on the outbound allow-list.")
URL_PRIVATE = register("outbound_url_private", 422, "The URL resolves to a private, loopback or link-local address.")
URL_UNRESOLVABLE = register("outbound_url_unresolvable", 422, "The URL's host does not resolve.")
OUTBOUND_CODES = (URL_INVALID, URL_NOT_ALLOWED, URL_PRIVATE, URL_UNRESOLVABLE)


DEFAULT_PORTS = {"http": 80, "https": 443}


Resolver = Callable[[str, int], Iterable[str]]


class OutboundURLRefused(ValueError):
    """The URL may not be called (nothing was sent). `code` is stable for API clients."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Target:
    """A checked URL: `url` is rebuilt from the checked parts and is what is requested."""

    scheme: str
    host: str
    port: int
    path: str
    query: str
    addresses: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}" + (f"?{self.query}" if self.query else "")


_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$"
)
_AMBIGUOUS_ESCAPES = re.compile(r"%(2e|2f|5c)", re.IGNORECASE)
# IPv6 ranges that carry an IPv4 address with no `ipaddress` property of their own.
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def normalize_path(path: str) -> str:
    """`path` without dot segments (RFC 3986 5.2.4); never above the root."""
    if _AMBIGUOUS_ESCAPES.search(path):
        raise OutboundURLRefused(URL_INVALID, "Percent-encoded dots, slashes and backslashes are refused in URL paths.")
    segments = (path or "/").split("/")
    kept: list[str] = []
    for segment in segments:
        if segment == "..":
            if len(kept) > 1:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    if segments[-1] in (".", ".."):
        kept.append("")
    return "/".join(kept) if len(kept) > 1 else "/"


def _parse(url: str) -> Target:
    if not isinstance(url, str) or not url.isascii() or "\\" in url or any(c <= " " or c == "\x7f" for c in url):
        raise OutboundURLRefused(
            URL_INVALID, "The URL must be ASCII without spaces, control characters or backslashes."
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise OutboundURLRefused(URL_INVALID, "The URL is not valid.") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise OutboundURLRefused(URL_INVALID, "Only http and https URLs with a host can be called.")
    if "@" in parts.netloc:
        raise OutboundURLRefused(URL_INVALID, "URLs with credentials in them are refused.")
    host = parts.hostname.lower()
    if _ip(host) is None and not _HOST_NAME.match(host):
        raise OutboundURLRefused(URL_INVALID, f"{host!r} is not a host name.")
    return Target(scheme, host, port or DEFAULT_PORTS[scheme], normalize_path(parts.path), parts.query)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _path_under(path: str, prefix: str) -> bool:
    if prefix.endswith("/"):
        return path.startswith(prefix)
    return path == prefix or path.startswith(prefix + "/")


def _entry_matches(entry: str, target: Target) -> bool:
    if "://" not in entry:
        return fnmatch.fnmatchcase(target.host, entry.lower())
    try:
        allowed = urlsplit(entry)
        port = allowed.port
        scheme = allowed.scheme.lower()
        prefix = normalize_path(allowed.path)
    except (ValueError, OutboundURLRefused):
        return False  # a malformed entry allows nothing
    return (
        scheme == target.scheme
        and fnmatch.fnmatchcase(target.host, (allowed.hostname or "").lower())
        and (port or DEFAULT_PORTS.get(scheme)) == target.port
        and _path_under(target.path, prefix)
    )


def address_refusal(address: str, *, allow_private: bool, allowed_networks: Iterable[str] = ()) -> str | None:
    """Why the server may not connect to `address`, or None if it may."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if any(ip in ipaddress.ip_network(network, strict=False) for network in allowed_networks):
        return None
    if ip.is_multicast or ip.is_unspecified or (ip.is_reserved and not ip.is_loopback):
        return "a multicast, unspecified or reserved address"
    if isinstance(ip, ipaddress.IPv6Address) and (
        ip.sixtofour is not None
        or ip.teredo is not None
        or any(ip in net for net in _NAT64)
        or (ip in _IPV4_COMPATIBLE and not ip.is_loopback)
    ):
        return None if allow_private else "an IPv6 address embedding an IPv4 one (6to4, Teredo, NAT64)"
    if not ip.is_global:
        return None if allow_private else "a private, loopback or link-local address"
    return None


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def check_url(
    url: str,
    *,
    resolve: bool = True,
    resolver: Resolver | None = None,
    allowlist: Iterable[str] | None = None,
    allow_private: bool | None = None,
    allowed_networks: Iterable[str] | None = None,
) -> Target:
    """The checked `Target` of `url` (with every address it resolves to, all allowed),
    or OutboundURLRefused. Keyword arguments left None come from the settings."""
    allowlist = settings.OUTBOUND_URL_ALLOWLIST if allowlist is None else allowlist
    allow_private = settings.OUTBOUND_ALLOW_PRIVATE if allow_private is None else allow_private
    if allowed_networks is None:
        allowed_networks = settings.OUTBOUND_ALLOWED_NETWORKS
    target = _parse(url)
    if not any(_entry_matches(entry.strip(), target) for entry in allowlist if entry.strip()):
        raise OutboundURLRefused(
            URL_NOT_ALLOWED, f"{target.url} is not on the outbound allow-list (OUTBOUND_URL_ALLOWLIST)."
        )
    literal = _ip(target.host)
    if literal is not None:
        addresses = [str(literal)]
    elif not resolve:
        return target
    else:
        try:
            addresses = list((resolver or system_resolver)(target.host, target.port))
        except (OSError, UnicodeError) as exc:
            raise OutboundURLRefused(URL_UNRESOLVABLE, f"The host {target.host!r} does not resolve: {exc}.") from None
        if not addresses:
            raise OutboundURLRefused(URL_UNRESOLVABLE, f"The host {target.host!r} does not resolve.")
    for address in addresses:
        reason = address_refusal(address, allow_private=allow_private, allowed_networks=allowed_networks)
        if reason:
            raise OutboundURLRefused(URL_PRIVATE, f"{target.host} resolves to {address}, {reason}; those are refused.")
    return Target(target.scheme, target.host, target.port, target.path, target.query, tuple(addresses))


def check_outbound_url(url: str, *, resolve: bool = True, **policy) -> str:
    """`url` if the server may call it, else OutboundURLRefused (for checks at submission)."""
    check_url(url, resolve=resolve, **policy)
    return url
