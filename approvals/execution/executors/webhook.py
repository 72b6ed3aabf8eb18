"""POST the approved params to an allow-listed URL, signed, with the idempotency key.

The URL is the request's ``target["url"]`` (so it is part of what reviewers
approved and what re-validation hashes); the body is the approved params as
JSON, sent through `controlplane.http.outbound.signed_post` (allow-list, one
pinned DNS resolution, no redirects). Headers:

- ``Idempotency-Key``: the request's execution key, the same on every attempt;
- ``X-Controlplane-Request``: the approval request id;
- ``X-Controlplane-Timestamp`` and ``X-Controlplane-Signature`` (the outbound
  module's scheme) keyed with ``EXECUTOR_WEBHOOK_SECRET``.

Only a 2xx answer is success; a 3xx fails the request. Whether a retry is safe
depends on the receiver honouring the key: set ``WEBHOOK_EXECUTOR_IDEMPOTENT``
only when it does. Until then a timeout or a 5xx after the body was sent fails
with ``outcome_unknown`` rather than risking a second delivery; a failure to
connect is always retried.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from controlplane.http.outbound import OutboundFailed, OutboundURLRefused, signed_post

from .base import ExecutionContext, Executor, PermanentExecutionError, RetryableExecutionError


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
        body = json.dumps(context.params, sort_keys=True, separators=(",", ":")).encode()
        headers = {"Idempotency-Key": context.idempotency_key, "X-Controlplane-Request": context.request_id}
        timeout = min(float(settings.EXECUTOR_WEBHOOK_TIMEOUT_SECONDS), context.seconds_left())
        try:
            answer = signed_post(url, body, secret=settings.EXECUTOR_WEBHOOK_SECRET, timeout=timeout, headers=headers)
        except OutboundURLRefused as exc:
            raise PermanentExecutionError(exc.message, code=exc.code) from None
        except OutboundFailed as exc:
            if not exc.sent:  # nothing was sent: always safe to try again
                raise RetryableExecutionError(f"{exc}", code="webhook_unreachable") from None
            raise self._after_sending(f"No answer: {exc}.") from None

        status = answer.status_code
        if answer.is_success:
            return {"status": status, "response_bytes": len(answer.body)}
        if answer.is_redirect:
            raise PermanentExecutionError(
                f"The webhook answered {status}; redirects are not followed.", code="webhook_redirect_refused"
            )
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
