"""What the offline verifier stories share (tests/audit/test_offline_verifier_*.py): eight audit
events, an export's lines, the verifier called in process (`verify`) and as a command in a
clean environment (`run_verifier`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from audit.chain import Actor, record
from hitl_controlplane.verify import verify_export

from .conftest import SIGNING_KEY

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def eight_events(alice, refund_request, system) -> None:
    """A refund's story, with awkward text in it (commas, quotes, newlines, a formula)."""
    user = Actor.for_user(alice)
    record(
        "request.submitted",
        actor=Actor.for_agent(type("A", (), {"pk": 7, "name": "mail-bot"})()),
        request=refund_request,
        metadata={"note": 'says "hi",\nthen leaves'},
    )
    record(
        "request.queued",
        actor=system,
        request=refund_request,
        metadata={"risk_level": "high", "rule": "refunds", "to": "pending_approval"},
    )
    record("decision.recorded", actor=user, request=refund_request, metadata={"verdict": "approve"})
    record("request.approved", actor=user, request=refund_request, metadata={"to": "approved"})
    record("request.execution_claimed", actor=system, request=refund_request, metadata={"memo": "=SUM(A1:A9)"})
    record("request.succeeded", actor=system, request=refund_request, metadata={"to": "succeeded"})
    record("policy.changed", actor=user, metadata={"amount": "12.30", "é": "ünïcödé"})
    record("agent.created", actor=user, metadata={"name": "-rm -rf"})


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def verify(path: Path, **kwargs) -> tuple[bool, str, int | None]:
    verdict = verify_export(path, key=SIGNING_KEY, **kwargs)
    return verdict.ok, verdict.message, verdict.bad_seq


def run_verifier(*args: str) -> subprocess.CompletedProcess:
    """`python -m audit.verify ARGS` in a clean environment (no key in it), importing this tree's client."""
    return subprocess.run(
        [sys.executable, "-m", "audit.verify", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT_ROOT / "clients" / "python")},
    )
