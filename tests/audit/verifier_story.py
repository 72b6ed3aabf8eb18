"""What the offline verifier stories share (tests/audit/test_offline_verifier_*.py): eight audit
events (the `eight_events` fixture, in conftest), an export's lines, the verifier called in process (`verify`) and as a command in a
clean environment (`run_verifier`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hitl_controlplane.verify import verify_export

from .conftest import SIGNING_KEY

PROJECT_ROOT = Path(__file__).resolve().parents[2]


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
