"""The error codes the audit app's JSON endpoints answer with.

The audit app imports no other app and not the site's HTTP plumbing (.importlinter), so
it cannot read the site's registry of codes (`controlplane.http.codes`) itself. Instead
it declares here the codes only it answers with (`OWN`, which the site registers at
start) and names the site's codes it answers with too (`SHARED`); at start the site hands
it the registry's statuses (`use_statuses`, from `controlplane.apps`). So each code and
its status are said once, in the registry, and the audit app cannot drift from it.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["OWN", "SHARED", "status", "use_statuses"]

# code: (HTTP status, description), registered with the site's registry at start.
OWN: dict[str, tuple[int, str]] = {
    "invalid_filter": (400, "An audit filter value cannot be understood; `details.field` names it."),
    "export_not_found": (404, "No finished audit export has that export_id."),
    "invalid_tree_query": (400, "A Merkle tree query value is not a usable size or seq; `details.field` names it."),
    "checkpoint_not_found": (404, "No signed-note checkpoint of the audit tree has been issued yet."),
    "tree_size_unknown": (404, "The audit tree does not have that size yet; `details.tree_size` is its size now."),
    "not_a_checkpoint_size": (404, "No published checkpoint has that tree size; `details.field` names the value."),
    "invalid_cosignature": (400, "Not a cosigned checkpoint note, or a configured witness's cosignature fails."),
    "witness_unknown": (403, "No signature line on the posted note is from a configured witness (AUDIT_WITNESSES)."),
    "checkpoint_unknown": (404, "The posted note's checkpoint (size and root) is not one this log issued."),
}
# The site's own codes the audit endpoints answer with as well.
SHARED: tuple[str, ...] = ("method_not_allowed", "not_authenticated", "permission_denied")

_status_of: Callable[[str], int] | None = None


def use_statuses(status_of: Callable[[str], int]) -> None:
    """Answer with the site's statuses: `status_of(code)` is the registry's (once, at start).

    Every code this app answers with is looked up now, so one the registry lacks fails
    the start rather than the first error answer.
    """
    global _status_of
    for code in (*OWN, *SHARED):
        status_of(code)
    _status_of = status_of


def status(code: str) -> int:
    """The HTTP status of `code`, as the site's registry has it."""
    if _status_of is None:
        raise RuntimeError("the site has not handed the audit app its error codes (controlplane.apps)")
    return _status_of(code)
