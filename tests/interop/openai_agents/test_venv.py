"""The interop venv is keyed by what it installs (that it imports the client from this tree:
test_openai_agents.py)."""

from __future__ import annotations

import shutil

from .venv import CLIENT, REQUIREMENTS, client_dependencies, content_hash


def copy_inputs(tmp_path):
    client = tmp_path / "client"
    (client / "hitl_controlplane").mkdir(parents=True)
    shutil.copy(CLIENT / "pyproject.toml", client / "pyproject.toml")
    (client / "hitl_controlplane" / "__init__.py").write_text("")
    requirements = tmp_path / "requirements.txt"
    shutil.copy(REQUIREMENTS, requirements)
    return requirements, client


def test_the_key_is_the_pinned_sdk_the_client_dependencies_and_the_client_path(tmp_path):
    requirements, client = copy_inputs(tmp_path)
    key = content_hash(requirements, client)

    (client / "hitl_controlplane" / "__init__.py").write_text("EDITED = True\n")
    assert content_hash(requirements, client) == key, "an edit to the client's code must not rebuild the venv"

    pyproject = client / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"cryptography>=42"', '"cryptography>=43"'))
    assert client_dependencies(client)[-1] == "cryptography>=43"
    assert content_hash(requirements, client) != key, "a changed client dependency rebuilds the venv"

    before = content_hash(requirements, client)
    requirements.write_text(requirements.read_text() + "\n# touched\n")
    changed = content_hash(requirements, client)
    assert changed != before, "a changed requirements.txt rebuilds the venv"

    moved = tmp_path / "elsewhere"
    shutil.copytree(client, moved)
    assert content_hash(requirements, moved) != changed, "another tree's client gets its own venv"
