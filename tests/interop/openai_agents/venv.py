"""The interop virtualenv: the real `openai-agents` and the client's dependencies, the client from this tree.

Built once per content under the var dir: requirements.txt, the client's declared
dependencies (clients/python/pyproject.toml) and the client's path hash into the
directory name. The client itself is not installed: a `.pth` file in the venv's
site-packages puts `<repo>/clients/python` on the path, so the hosts import the
client as it is in this tree and an edit to it does not rebuild the venv (only a
changed dependency does). A machine without PyPI skips with the reason, a
failure under REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.live import ROOT

HERE = Path(__file__).resolve().parent
HOST = HERE / "host.py"
REQUIREMENTS = HERE / "requirements.txt"
CLIENT = ROOT / "clients" / "python"
PTH_NAME = "hitl_controlplane_worktree.pth"


def client_dependencies(client: Path = CLIENT) -> list[str]:
    """The requirement strings the client distribution declares (its pyproject's [project] dependencies)."""
    project = tomllib.loads((client / "pyproject.toml").read_text())["project"]
    return [str(requirement) for requirement in project.get("dependencies", [])]


def content_hash(requirements: Path = REQUIREMENTS, client: Path = CLIENT) -> str:
    """What the venv's contents depend on: the pinned SDK, the client's dependencies and where the client is."""
    digest = hashlib.sha256(requirements.read_bytes())
    for requirement in client_dependencies(client):
        digest.update(b"\0dep\0" + requirement.encode())
    digest.update(b"\0client\0" + str(client.resolve()).encode())
    return digest.hexdigest()[:16]


def _run(step: list[str], cwd: Path) -> str:
    done = subprocess.run(
        step, capture_output=True, text=True, cwd=cwd, timeout=900, env={**os.environ, "PIP_NO_INPUT": "1"}
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"could not build the openai-agents interop venv ({' '.join(step[:4])}...): "
            f"{(done.stderr or done.stdout)[-800:]}"
        )
    return done.stdout


def build(base: Path) -> Path:
    """The venv's python, building the venv first if this content has none. Raises RuntimeError."""
    target = base / f"openai-agents-{content_hash()}"
    python = target / "bin" / "python"
    if (target / ".ready").exists():
        return python
    shutil.rmtree(target, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(target)], base)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "-r", str(REQUIREMENTS), *client_dependencies()], base)
    site_packages = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], base)
    (Path(site_packages.strip()) / PTH_NAME).write_text(f"{CLIENT.resolve()}\n")
    (target / ".ready").touch()
    return python
