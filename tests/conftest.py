"""The suite-wide conftest: registers the fixture plugin and sets what every test shares.

Fixtures every folder uses live in `tests/fixtures/` (see its docstring): the real
services and the daphne server (`services`), and the named people and agent the
tests tell stories about (`cast`). A folder's conftest adds only what its own
stories need.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.fixtures.services", "tests.fixtures.cast"]

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
