"""The one way the server calls out: agent callbacks, the webhook executor and
notification webhooks all send through `signed_post`.

Policy (checked by `outbound_urls.check_url`, re-exported here), on the parsed URL
(never on its text):

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

import functools
import hashlib
import hmac
import random
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import httpx

from .outbound_urls import (
    OUTBOUND_CODES,
    OutboundURLRefused,
    Resolver,
    Target,
    address_refusal,
    check_outbound_url,
    check_url,
)

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


SIGNATURE_HEADER = "X-Controlplane-Signature"
TIMESTAMP_HEADER = "X-Controlplane-Timestamp"
USER_AGENT = "controlplane-outbound"


class OutboundFailed(Exception):
    """The call failed. `sent` is False only when no connection was made, so the
    receiver cannot have seen the body (a retry is always safe then)."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


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
