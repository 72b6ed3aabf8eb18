"""POST the approved params to an allow-listed URL, signed, with the idempotency key.

The URL is the request's ``target["url"]`` (so it is part of what reviewers
approved and what re-validation hashes); the body is the approved params as
JSON. Headers:

- ``Idempotency-Key``: the request's execution key, the same on every attempt;
- ``X-Controlplane-Request``: the approval request id;
- ``X-Controlplane-Timestamp`` and ``X-Controlplane-Signature``:
  ``sha256=<hex HMAC-SHA256(EXECUTOR_WEBHOOK_SECRET, timestamp + "." + body)>``.

Only a 2xx answer is success. Redirects are never followed (a 3xx fails the
request), and the URL is checked against the outbound allow-list right before
each attempt. Whether a retry is safe depends on the receiver honouring the
key: set ``WEBHOOK_EXECUTOR_IDEMPOTENT`` only when it does. Until then a
timeout or a 5xx after the body was sent fails with ``outcome_unknown`` rather
than risking a second delivery; a failure to connect is always retried.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import socket
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from controlplane.http.outbound import OutboundURLRefused, check_outbound_url

from .base import ExecutionContext, Executor, PermanentExecutionError, RetryableExecutionError

SIGNATURE_HEADER = "X-Controlplane-Signature"
TIMESTAMP_HEADER = "X-Controlplane-Timestamp"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header value a receiver recomputes to trust the call."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


class WebhookExecutor(Executor):
    name = "webhook"
    description = "POSTs the approved params to target.url (allow-listed), signed, with Idempotency-Key."

    @property
    def idempotent(self) -> bool:  # type: ignore[override]
        return settings.WEBHOOK_EXECUTOR_IDEMPOTENT

    def run(self, context: ExecutionContext) -> dict[str, Any]:
        url = context.target.get("url")
        if not isinstance(url, str) or not url:
            raise PermanentExecutionError("The webhook target has no url.", code="webhook_url_missing")
        try:
            check_outbound_url(url)
        except OutboundURLRefused as exc:
            raise PermanentExecutionError(exc.message, code=exc.code) from None

        body = json.dumps(context.params, sort_keys=True, separators=(",", ":")).encode()
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "controlplane-webhook-executor",
            "Idempotency-Key": context.idempotency_key,
            "X-Controlplane-Request": context.request_id,
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(settings.EXECUTOR_WEBHOOK_SECRET, timestamp, body),
        }
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        timeout = min(float(settings.EXECUTOR_WEBHOOK_TIMEOUT_SECONDS), context.seconds_left())
        if parts.scheme == "https":
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=timeout, context=ssl.create_default_context()
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        try:
            try:
                connection.connect()
            except (OSError, socket.timeout) as exc:
                # Nothing was sent: always safe to try again.
                raise RetryableExecutionError(f"Could not connect to {parts.hostname}: {exc}.",
                                              code="webhook_unreachable") from None
            try:
                connection.request("POST", path, body=body, headers=headers)
                response = connection.getresponse()
                answer = response.read(64 * 1024)
            except (OSError, socket.timeout, http.client.HTTPException) as exc:
                raise self._after_sending(f"No answer from {parts.hostname}: {exc}.")
        finally:
            connection.close()

        status = response.status
        if 200 <= status < 300:
            return {"status": status, "response_bytes": len(answer)}
        if 300 <= status < 400:
            raise PermanentExecutionError(f"The webhook answered {status}; redirects are not followed.",
                                          code="webhook_redirect_refused")
        if status == 429 or status >= 500:
            raise self._after_sending(f"The webhook answered {status}.")
        raise PermanentExecutionError(f"The webhook refused the call with {status}.", code="webhook_refused")

    def _after_sending(self, message: str) -> Exception:
        """The body may have arrived: retry only if the receiver dedupes on the key."""
        if self.idempotent:
            return RetryableExecutionError(message, code="webhook_failed")
        return PermanentExecutionError(
            f"{message} It may or may not have acted; check the receiver before resubmitting.",
            code="outcome_unknown",
        )
