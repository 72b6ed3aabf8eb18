"""Send the approved email through Django's email backend.

Params: ``to`` (list or one address), optional ``cc``, ``bcc``, ``subject``,
``body``, ``from``. SMTP has no idempotency key, so this executor is not
idempotent: a worker lost mid-send ends ``outcome_unknown``, never a second
send. The key travels as the ``X-Idempotency-Key`` header (and Message-ID seed)
so a receiving system can still spot a duplicate.
"""

from __future__ import annotations

import smtplib
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage
from django.core.mail.message import make_msgid

from .base import ExecutionContext, Executor, PermanentExecutionError, RetryableExecutionError


def _addresses(value: Any, field: str) -> list[str]:
    if value in (None, "", []):
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and "@" in item for item in items):
        raise PermanentExecutionError(
            f"params.{field} must be an address or a list of addresses.", code="email_params_invalid"
        )
    return items


class EmailExecutor(Executor):
    name = "email"
    idempotent = False
    description = "Sends params.to/cc/bcc, subject and body through Django's email backend."
    params = ("to", "cc", "bcc", "subject", "body", "from")

    def run(self, context: ExecutionContext) -> dict[str, Any]:
        params = context.params
        to, cc, bcc = (_addresses(params.get(f), f) for f in ("to", "cc", "bcc"))
        if not (to or cc or bcc):
            raise PermanentExecutionError("The email has no recipients.", code="email_params_invalid")
        message_id = make_msgid(idstring=context.idempotency_key, domain=settings.EXECUTOR_EMAIL_DOMAIN)
        message = EmailMessage(
            subject=str(params.get("subject", "")),
            body=str(params.get("body", "")),
            from_email=params.get("from") or settings.DEFAULT_FROM_EMAIL,
            to=to,
            cc=cc,
            bcc=bcc,
            headers={"Message-ID": message_id, "X-Idempotency-Key": context.idempotency_key},
        )
        try:
            sent = message.send(fail_silently=False)
        except (smtplib.SMTPConnectError, smtplib.SMTPServerDisconnected, ConnectionRefusedError) as exc:
            # Refused before the message was accepted: nothing was sent.
            raise RetryableExecutionError(f"The mail server is unreachable: {exc}.", code="email_unreachable") from None
        except smtplib.SMTPRecipientsRefused as exc:
            raise PermanentExecutionError(
                f"Recipients refused: {sorted(exc.recipients)}.", code="email_recipients_refused"
            ) from None
        return {"sent": sent, "message_id": message_id, "recipients": len(set(to + cc + bcc))}
