"""The interop virtualenv: the real `openai-agents` and the client installed from clients/python.

Built once per content (requirements.txt and the client's sources hash into the
directory name) under the var dir; a machine without PyPI skips with the reason,
a failure under REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.live import ROOT

HERE = Path(__file__).resolve().parent
HOST = HERE / "host.py"
REQUIREMENTS = HERE / "requirements.txt"
CLIENT = ROOT / "clients" / "python"


def content_hash() -> str:
    digest = hashlib.sha256(REQUIREMENTS.read_bytes())
    for path in sorted(
        p
        for p in CLIENT.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc") and ".egg-info" not in str(p)
    ):
        digest.update(str(path.relative_to(CLIENT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build(base: Path) -> Path:
    """The venv's python, building the venv first if this content has none. Raises RuntimeError."""
    target = base / f"openai-agents-{content_hash()}"
    python = target / "bin" / "python"
    if (target / ".ready").exists():
        return python
    shutil.rmtree(target, ignore_errors=True)
    steps = [
        [sys.executable, "-m", "venv", str(target)],
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(REQUIREMENTS),
            str(CLIENT),
        ],
    ]
    for step in steps:
        done = subprocess.run(
            step, capture_output=True, text=True, cwd=base, timeout=900, env={**os.environ, "PIP_NO_INPUT": "1"}
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"could not build the openai-agents interop venv ({' '.join(step[:4])}...): "
                f"{(done.stderr or done.stdout)[-800:]}"
            )
    (target / ".ready").touch()
    return python
