"""Auditors' JSON endpoints for the Merkle tree: its size and root, inclusion and consistency proofs.

Auditors only (`audit.view_auditevent`), GET/HEAD only; errors are the project's JSON
shape with stable codes (audit/error_codes.py). Hashes are lowercase hex; the encodings
are specified in docs/evidence-format.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, JsonResponse

from . import tree
from .views import VIEW_PERMISSION, _error

# Larger than any tree this log will hold, small enough that a bigint and the bit tricks hold it.
MAX_SIZE = 2**62


def _auditor_json(view: Callable[[HttpRequest], JsonResponse]) -> Callable[[HttpRequest], JsonResponse]:
    """GET/HEAD, signed in, the auditors' view permission: refused as JSON, never redirected."""

    def guarded(request: HttpRequest) -> JsonResponse:
        if request.method not in ("GET", "HEAD"):
            return _error("method_not_allowed", "The audit tree is read-only: use GET.")
        if not request.user.is_authenticated:
            return _error("not_authenticated", "Sign in as an auditor to read the audit tree.")
        if not request.user.has_perm(VIEW_PERMISSION):
            return _error("permission_denied", "Only auditors may read the audit tree.")
        response = view(request)
        response["Cache-Control"] = "no-store"
        return response

    guarded.__name__ = view.__name__
    guarded.__doc__ = view.__doc__
    return guarded


class _BadQuery(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def _number(request: HttpRequest, name: str, default: int | None = None) -> int:
    raw = request.GET.get(name, "")
    if not raw and default is not None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19) or not 1 <= int(raw) <= MAX_SIZE:
        raise _BadQuery(name, f"`{name}` must be a positive whole number.")
    return int(raw)


def _answer(build: Callable[[int], dict[str, Any]], request: HttpRequest) -> JsonResponse:
    current = tree.size()
    try:
        size = _number(request, "size", default=current)
        if size > current:
            return _error(
                "tree_size_unknown",
                f"The audit tree holds {current} events; it has no tree of size {size} yet.",
                tree_size=current,
            )
        return JsonResponse(build(size))
    except _BadQuery as exc:
        return _error("invalid_tree_query", exc.message, field=exc.field)


@_auditor_json
def tree_head(request: HttpRequest) -> JsonResponse:
    """The tree's size and root hash (`?size=` for an earlier size)."""
    return _answer(lambda size: {"tree_size": size, "root_hash": tree.root(size).hex()}, request)


@_auditor_json
def inclusion(request: HttpRequest) -> JsonResponse:
    """The proof that event `seq` is leaf seq - 1 of the tree of `size` events (default: the whole tree)."""

    def build(size: int) -> dict[str, Any]:
        seq = _number(request, "seq")
        if seq > size:
            raise _BadQuery("seq", f"Event {seq} is not in the tree of {size} events.")
        return {
            "seq": seq,
            "leaf_index": seq - 1,
            "tree_size": size,
            "leaf_hash": tree.leaf_hash(seq).hex(),
            "root_hash": tree.root(size).hex(),
            "proof": [node.hex() for node in tree.inclusion_proof(seq, size)],
        }

    return _answer(build, request)


@_auditor_json
def consistency(request: HttpRequest) -> JsonResponse:
    """The proof that the tree of `first` events is a prefix of the tree of `size` events."""

    def build(size: int) -> dict[str, Any]:
        first = _number(request, "first")
        if first > size:
            raise _BadQuery("first", f"`first` ({first}) must not exceed `size` ({size}).")
        return {
            "first": first,
            "tree_size": size,
            "first_root": tree.root(first).hex(),
            "root_hash": tree.root(size).hex(),
            "proof": [node.hex() for node in tree.consistency_proof(first, size)],
        }

    return _answer(build, request)


__all__ = ["consistency", "inclusion", "tree_head"]
