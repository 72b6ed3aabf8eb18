"""The suite-wide conftest: registers the fixture plugin and sets what every test shares.

Fixtures every folder uses live in `tests/fixtures/` (see its docstring): the real
services and the daphne server (`services`), and the named people and agent the
tests tell stories about (`cast`). A folder's conftest adds only what its own
stories need.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from hitl_controlplane.decisions import trusted_keys

pytest_plugins = [
    "tests.fixtures.services",
    "tests.fixtures.cast",
    "tests.fixtures.typescript",
    "tests.fixtures.executions",
]

# Helpers that assert on the tests' behalf report like the tests' own asserts.
pytest.register_assert_rewrite("tests.sockets")


@pytest.fixture(autouse=True)
def policy_changes_apply_at_once(settings):
    """Rule changes made as test setup apply at once (POLICY_FOUR_EYES off).

    Four eyes on policy has its own tests (tests/tuning/test_four_eyes.py), which
    turn it back on explicitly.
    """
    settings.POLICY_FOUR_EYES = False


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Real hashing costs ~0.5 s a user; tests create dozens."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def server_public_keys() -> list[str]:
    """What an agent developer pins to verify decision signatures: the `ed25519:...`
    lines `manage.py audit_public_key` prints, the current key first."""
    out = io.StringIO()
    call_command("audit_public_key", stdout=out)
    return [line.split("#")[0].strip() for line in out.getvalue().splitlines() if line.split("#")[0].strip()]


@pytest.fixture
def server_public_key(server_public_keys) -> str:
    return server_public_keys[0]


@pytest.fixture
def server_keys(server_public_keys) -> dict:
    """The pinned keys as the client holds them, by key id."""
    return trusted_keys(server_public_keys)
