"""The one way the server calls out: agent callbacks, the webhook executor and
notification webhooks all send through `signed_post`.

Policy, on the parsed URL (never on its text):

- http(s) only, no credentials, an ASCII host name or an IP literal, no
  percent-encoded dot, slash or backslash in the path (servers decode those
  differently), and the path with its dot segments removed, so
  ``/agent/../admin`` is checked (and sent) as ``/admin``.
- It must match the admin-managed allow-list (`OUTBOUND_URL_ALLOWLIST`). An
  entry with a scheme is a URL prefix compared part by part: same scheme, same
  host (``*`` wildcards allowed), same port (the scheme's default when the entry
  names none), and a path under the entry's (``/agent`` covers ``/agent`` and
  ``/agent/...``, never ``/agents``). An entry without a scheme is a host pattern
  (``example.com``, ``*.example.com``) on any port.
- Every address the host resolves to must be public. Multicast, unspecified and
  reserved addresses are always refused; private, loopback, link-local, shared,
  documentation and IPv4-embedding IPv6 ranges (6to4, Teredo, NAT64,
  IPv4-compatible; IPv4-mapped ones are judged as the IPv4 address they carry)
  are refused unless `OUTBOUND_ALLOW_PRIVATE` is on or the address is in
  `OUTBOUND_ALLOWED_NETWORKS`.

The host is resolved once per call and the connection goes to an address that
was checked (`PinnedTransport`: TLS SNI and ``Host`` stay the URL's host name),
so a resolver that answers a public address to the check and a loopback one to
the connect cannot redirect the POST. Redirects are never followed.

Signature (one scheme, one spelling, documented in docs/agents.md):
``X-Controlplane-Timestamp: <unix seconds>`` and
``X-Controlplane-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>``.
Receivers refuse stale timestamps and compare in constant time
(`verify_signature`). Retries wait `backoff(attempt)`.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import hmac
import ipaddress
import random
import re
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from .codes import register

__all__ = [
    "OUTBOUND_CODES",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "Answer",
    "OutboundFailed",
    "OutboundURLRefused",
    "PinnedTransport",
    "Target",
    "address_refusal",
    "backoff",
    "check_outbound_url",
    "check_url",
    "sign",
    "signed_post",
    "verify_signature",
]

URL_INVALID = register("outbound_url_invalid", 422, "The URL is not an http(s) URL the server may call.")
URL_NOT_ALLOWED = register("outbound_url_not_allowed", 422, "The URL's host is not on the outbound allow-list.")
URL_PRIVATE = register("outbound_url_private", 422, "The URL resolves to a private, loopback or link-local address.")
URL_UNRESOLVABLE = register("outbound_url_unresolvable", 422, "The URL's host does not resolve.")
OUTBOUND_CODES = (URL_INVALID, URL_NOT_ALLOWED, URL_PRIVATE, URL_UNRESOLVABLE)

SIGNATURE_HEADER = "X-Controlplane-Signature"
TIMESTAMP_HEADER = "X-Controlplane-Timestamp"
USER_AGENT = "controlplane-outbound"
DEFAULT_PORTS = {"http": 80, "https": 443}

Resolver = Callable[[str, int], Iterable[str]]


class OutboundURLRefused(ValueError):
    """The URL may not be called (nothing was sent). `code` is stable for API clients."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class OutboundFailed(Exception):
    """The call failed. `sent` is False only when no connection was made, so the
    receiver cannot have seen the body (a retry is always safe then)."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


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


@dataclass(frozen=True)
class Answer:
    status_code: int
    body: bytes  # at most the caller's `max_answer_bytes`

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def is_redirect(self) -> bool:
        return 300 <= self.status_code < 400


# --- Signature and backoff ----------------------------------------------------------------------


def sign(secret: str | bytes, timestamp: int | str, body: bytes) -> str:
    key = secret.encode() if isinstance(secret, str) else secret
    mac = hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def verify_signature(
    secret: str | bytes, timestamp: str, body: bytes, signature: str, *, max_age: int = 300, now: float | None = None
) -> bool:
    """What a receiver does: a fresh timestamp and a matching signature (constant-time)."""
    try:
        stamp = int(timestamp)
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - stamp) > max_age:
        return False
    return hmac.compare_digest(sign(secret, stamp, body), signature)


def backoff(attempt: int, *, base: float, cap: float, jitter: float = 0.2) -> timedelta:
    """The wait after the `attempt`-th failure: base, 2x, 4x... up to `cap`, spread by
    ±`jitter` so receivers coming back up are not hit by every sender at once."""
    seconds = min(base * 2 ** (attempt - 1), cap)
    if jitter:
        seconds *= random.uniform(1 - jitter, 1 + jitter)
    return timedelta(seconds=seconds)


# --- URL policy -----------------------------------------------------------------------------------

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
    return list(dict.fromkeys(info[4][0] for info in infos))


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


# --- Sending ----------------------------------------------------------------------------------------


class PinnedTransport(httpx.HTTPTransport):
    """Connects to one checked address whatever the host name resolves to now; the
    request keeps its ``Host`` header and TLS verifies (and sends SNI for) the name."""

    def __init__(self, host: str, address: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self._host = host
        self._address = address

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host != self._host:
            raise httpx.ConnectError(f"{request.url.host} is not the pinned host {self._host}", request=request)
        request.url = request.url.copy_with(host=self._address)
        request.extensions = {**request.extensions, "sni_hostname": self._host}
        return super().handle_request(request)


@functools.cache
def _public_cas() -> ssl.SSLContext:
    # Built once: loading the CA bundle for every POST costs more than the POST itself.
    return httpx.create_ssl_context()


def _post_once(
    target: Target,
    address: str,
    body: bytes,
    headers: Mapping[str, str],
    timeout: float,
    max_answer_bytes: int,
    verify: ssl.SSLContext | bool,
) -> Answer:
    transport = PinnedTransport(target.host, address, verify=_public_cas() if verify is True else verify)
    # trust_env off: a proxy from the environment would resolve the name itself.
    with httpx.Client(transport=transport, follow_redirects=False, trust_env=False, timeout=timeout) as client:
        with client.stream("POST", target.url, content=body, headers=dict(headers)) as response:
            answer = bytearray()
            for chunk in response.iter_bytes():
                answer += chunk
                if len(answer) >= max_answer_bytes:
                    break
            return Answer(response.status_code, bytes(answer[:max_answer_bytes]))


def signed_post(
    url: str,
    body: bytes,
    *,
    secret: str | bytes,
    timeout: float,
    headers: Mapping[str, str] | None = None,
    resolver: Resolver | None = None,
    max_answer_bytes: int = 64 * 1024,
    verify: ssl.SSLContext | bool = True,
    **policy,
) -> Answer:
    """POST `body` (JSON) to `url`, signed with `secret`, to an address checked once.

    Raises OutboundURLRefused (the policy refuses it; nothing sent) or OutboundFailed
    (`sent` False when no checked address accepted a connection). Any answer,
    2xx or not, is returned: what a status means is the caller's business.
    `policy`: allowlist / allow_private / allowed_networks, as `check_url`; `verify`:
    the TLS context trusting the receivers' CA (default: the public CAs).
    """
    target = check_url(url, resolver=resolver, **policy)
    timestamp = int(time.time())
    sent_headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        **(headers or {}),
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(secret, timestamp, body),
    }
    unreachable: list[str] = []
    for address in target.addresses:
        try:
            return _post_once(target, address, body, sent_headers, timeout, max_answer_bytes, verify)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            unreachable.append(f"{address}: {type(exc).__name__}: {exc}")  # nothing sent: try the next one
        except httpx.HTTPError as exc:
            raise OutboundFailed(f"{type(exc).__name__}: {exc}", sent=True) from None
    raise OutboundFailed(f"Could not connect to {target.host} ({'; '.join(unreachable)}).", sent=False)
