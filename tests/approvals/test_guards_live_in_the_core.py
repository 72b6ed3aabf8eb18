"""Views, API views and consumers only translate: they never change a request's state
themselves, and never check a guard the services own (DESIGN.md "Guards live in the
core, not in the views")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = ("approvals", "agents", "audit", "controlplane")
# The one throttle every account page's password or code check goes through: for those
# pages it is what `approvals/services/step_up.py` is for decisions, so it may compare.
ACCOUNT_SECRETS_CORE = {Path("controlplane/accounts/password_checks.py")}


def translating_modules() -> list[Path]:
    """Every module whose job is HTTP or socket translation."""
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts or "client" in relative.parts:
                continue
            if relative in ACCOUNT_SECRETS_CORE:
                continue
            if (
                path.name in ("views.py", "api.py", "consumers.py")
                or path.name.endswith("_views.py")
                or "api" in relative.parts[1:-1]
                or "web" in relative.parts[1:-1]
                or "accounts" in relative.parts[1:-1]
            ):
                found.append(path)
    return found


def state_writes(tree: ast.AST) -> list[int]:
    """Lines that assign a `state` attribute or pass `state=` to a write."""
    lines = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        lines += [node.lineno for target in targets if isinstance(target, ast.Attribute) and target.attr == "state"]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            writes = node.func.attr in ("update", "create", "update_or_create", "get_or_create", "bulk_update")
            if writes and any(keyword.arg == "state" for keyword in node.keywords):
                lines.append(node.lineno)
            if node.func.attr == "setattr" or (isinstance(node.func, ast.Name) and node.func.id == "setattr"):
                lines.append(node.lineno)
    return lines


def guard_checks(tree: ast.AST) -> list[int]:
    """Lines where a translating module checks a password or a decide permission itself."""
    owned_by_the_core = {"check_password", "can_decide", "excluded_from_approving", "is_stopped"}
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            getattr(node.func, "attr", None) in owned_by_the_core or getattr(node.func, "id", None) in owned_by_the_core
        )
    ]


def test_the_translating_modules_are_found():
    names = {str(path.relative_to(ROOT)) for path in translating_modules()}
    assert {
        "approvals/web/views.py",
        "approvals/web/rules_views.py",
        "approvals/api/views.py",
        "agents/api/views.py",
        "approvals/web/consumers.py",
        "controlplane/accounts/signin.py",
    } <= names


@pytest.mark.parametrize("path", translating_modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_view_changes_state_or_checks_a_guard_itself(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    assert state_writes(tree) == [], f"{path.relative_to(ROOT)} writes a state; call a service instead"
    assert guard_checks(tree) == [], f"{path.relative_to(ROOT)} checks a guard the services own"


# The one mover of a request's state (`transition()`, its plain and conditional writes),
# and modules whose `state=` is another model's own column, not a request's.
STATE_MOVERS = {Path("approvals/services/core.py")}
OTHER_STATES = {Path("agents/callbacks.py"): "CallbackDelivery.state: which state a delivery announces"}


def app_modules() -> list[Path]:
    return [
        path.relative_to(ROOT)
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.relative_to(ROOT).parts
    ]


def test_only_transition_writes_a_state():
    """Not only views: no service, task, command or helper writes a state of its own
    (`.state = ...`, `.update(state=...)`); every move goes through `transition()`."""
    writers = {
        str(path): lines
        for path in app_modules()
        if path not in STATE_MOVERS | set(OTHER_STATES)
        and (lines := state_writes(ast.parse((ROOT / path).read_text(), filename=str(path))))
    }
    assert writers == {}, "call transition() (approvals.services.core) instead"
    assert all(state_writes(ast.parse((ROOT / path).read_text())) for path in STATE_MOVERS | set(OTHER_STATES)), (
        "a listed exception no longer writes a state: drop it from the list"
    )


def test_the_scan_catches_a_view_that_approves_by_hand():
    sneaky = ast.parse(
        "def approve(request, pk):\n"
        "    found = ApprovalRequest.objects.get(pk=pk)\n"
        "    if request.user.check_password(request.POST['password']):\n"
        "        found.state = 'approved'\n"
        "    ApprovalRequest.objects.filter(pk=pk).update(state='approved')\n"
    )
    assert state_writes(sneaky) == [4, 5]
    assert guard_checks(sneaky) == [3]
