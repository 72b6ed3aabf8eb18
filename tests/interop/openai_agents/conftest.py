from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.services import missing_service
from tests.live import ROOT

from .venv import build


@pytest.fixture(scope="session")
def openai_agents_python() -> Path:
    """The interop venv's python (built once per content; see venv.py)."""
    base = Path(os.environ.get("CONTROLPLANE_VAR_DIR", ROOT / "var")) / "interop"
    base.mkdir(parents=True, exist_ok=True)
    try:
        return build(base)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        missing_service(str(exc))
