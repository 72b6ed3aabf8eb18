"""The card's `respond`, one address for two answers that differ by kind: a
suspension's typed answer (suspensions.answer) or a reviewer's reply in place of an
action's tool (views.reply). The JSON API routes the same way (api/views.py `_decide`)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from ..states import Kind
from .suspensions import answer
from .views import _decidable, reply

__all__ = ["respond"]


@login_required
@require_POST
def respond(request: HttpRequest, pk) -> HttpResponse:
    target = _decidable(request, pk)
    if target.kind == Kind.SUSPENSION:
        return answer(request, target)
    return reply(request, target)
