"""The public checkpoint endpoints witnesses use (audit.witnesses, hitl_controlplane.witness).

- `GET /audit/checkpoint`: the newest checkpoint note, text/plain, with the configured
  witnesses' cosignature lines appended.
- `GET /audit/checkpoint/consistency?first=M&size=N`: the consistency proof between two
  published checkpoint sizes. Public like the checkpoint: it holds hashes only, and only
  for sizes the log already published (any other size is `not_a_checkpoint_size`; the
  auditors' `/audit/tree/consistency` answers any size).
- `POST /audit/checkpoint/cosignatures`: a witness's cosigned note (text/plain). No
  session and no CSRF token: the cosignature, by a key the operator configured, is the
  credential, and storing it again changes nothing.

Errors are the project's JSON shape with stable codes (audit/error_codes.py).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from hitl_controlplane.signed_note import MAX_NOTE_BYTES

from . import tree
from .models import AuditEvent
from .notes import CHECKPOINT_VERB
from .proof_views import _BadQuery, _number
from .views import _error
from .witnesses import CosignatureRefused, newest_checkpoint, receive, served_note

__all__ = ["checkpoint_consistency", "checkpoint_view", "post_cosignature"]


def checkpoint_view(request: HttpRequest) -> HttpResponse:
    """GET the newest checkpoint note with its cosignatures, text/plain; public."""
    if request.method not in ("GET", "HEAD"):
        return _error("method_not_allowed", "The checkpoint is read-only: use GET.")
    newest = newest_checkpoint()
    if newest is None:
        return _error("checkpoint_not_found", "No audit checkpoint has been issued yet.")
    seq, note, _ = newest
    response = HttpResponse(served_note(seq, note), content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    return response


def checkpoint_consistency(request: HttpRequest) -> JsonResponse:
    """GET the proof that published checkpoint size `first` is a prefix of published size `size`."""
    if request.method not in ("GET", "HEAD"):
        return _error("method_not_allowed", "Consistency proofs are read-only: use GET.")
    try:
        first, size = _number(request, "first"), _number(request, "size")
    except _BadQuery as exc:
        return _error("invalid_tree_query", exc.message, field=exc.field)
    if first > size:
        return _error("invalid_tree_query", f"`first` ({first}) must not exceed `size` ({size}).", field="first")
    published = set(
        AuditEvent.objects.filter(verb=CHECKPOINT_VERB, metadata__tree_size__in=[first, size]).values_list(
            "metadata__tree_size", flat=True
        )
    )
    for name, value in (("first", first), ("size", size)):
        if value not in published:
            return _error(
                "not_a_checkpoint_size",
                f"No published checkpoint has tree size {value}; ask for sizes of published checkpoints.",
                field=name,
            )
    response = JsonResponse(
        {
            "first": first,
            "tree_size": size,
            "first_root": tree.root(first).hex(),
            "root_hash": tree.root(size).hex(),
            "proof": [node.hex() for node in tree.consistency_proof(first, size)],
        }
    )
    response["Cache-Control"] = "no-cache"
    return response


@csrf_exempt
def post_cosignature(request: HttpRequest) -> JsonResponse:
    """POST a witness's cosigned checkpoint note; 201 when stored now, 200 when it already was."""
    if request.method != "POST":
        return _error("method_not_allowed", "POST a cosigned checkpoint note here.")
    length = request.headers.get("Content-Length", "")
    if not (length.isascii() and length.isdigit()) or int(length) > MAX_NOTE_BYTES:
        return _error("invalid_cosignature", f"A cosigned note is at most {MAX_NOTE_BYTES} bytes, with its length.")
    try:
        text = request.body.decode("utf-8")
    except UnicodeDecodeError:
        return _error("invalid_cosignature", "A cosigned note is UTF-8 text.")
    try:
        stored = receive(text)
    except CosignatureRefused as exc:
        return _error(exc.code, exc.message)
    body = {
        "stored": [
            {"witness": row.witness_name, "tree_size": row.tree_size, "cosigned_at": row.cosigned_at, "new": created}
            for row, created in stored
        ]
    }
    return JsonResponse(body, status=201 if any(created for _, created in stored) else 200)
