"""Nothing starts on development secrets outside DEBUG: daphne, the worker, beat and
every management command refuse, naming each problem; `make run`'s local keys pass."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane import keys

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Only bounds a process that wrongly started and keeps running; a refusal exits at once.
HANG_GUARD_SECONDS = 60

pytestmark = pytest.mark.slow


def good_keys() -> dict[str, str]:
    return {name: keys._new_key() for name in keys.REQUIRED_SECRETS}


def test_generated_keys_have_no_problems():
    assert keys.problems(good_keys()) == []


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("", "is not set"),
        ("short", "too short"),
        ("insecure-development-key-set-SECRET_KEY-in-production", "placeholder"),
        ("changeme-changeme-changeme-changeme-changeme", "placeholder"),
    ],
)
def test_each_unsafe_secret_is_named(value, said):
    values = {**good_keys(), "AUDIT_SIGNING_KEY": value}
    [problem] = keys.problems(values)
    assert problem.startswith("AUDIT_SIGNING_KEY") and said in problem


@given(first=st.sampled_from(list(keys.REQUIRED_SECRETS)), second=st.sampled_from(list(keys.REQUIRED_SECRETS)))
def test_two_secrets_sharing_a_value_are_refused(first, second):
    values = good_keys()
    values[second] = values[first]
    found = keys.problems(values)
    assert bool(found) == (first != second)
    assert all(first in problem and second in problem for problem in found)


def test_slack_secrets_are_optional_but_once_set_meet_the_same_bar():
    assert keys.problems(good_keys()) == []  # Slack not configured: nothing to refuse
    slack_secret = "0123456789abcdef0123456789abcdef"  # Slack's signing secrets are 32 hex digits
    assert keys.problems({**good_keys(), "SLACK_SIGNING_SECRET": slack_secret}) == []
    for value, said in [("xoxb-short", "too short"), ("xoxb-changeme-changeme-changeme-changeme", "placeholder")]:
        [problem] = keys.problems({**good_keys(), "SLACK_BOT_TOKEN": value})
        assert problem.startswith("SLACK_BOT_TOKEN") and said in problem
    shared = good_keys()
    [problem] = keys.problems({**shared, "SLACK_SIGNING_SECRET": shared["SECRET_KEY"]})
    assert "SECRET_KEY and SLACK_SIGNING_SECRET are the same value" in problem


def test_local_keys_are_private_stable_and_never_override_the_environment(tmp_path):
    path = keys.ensure_local_keys(tmp_path / "var" / "local-keys.env")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = keys.read_local_keys(path)
    assert keys.problems(first) == []
    assert keys.read_local_keys(keys.ensure_local_keys(path)) == first  # generated once

    environment = {name: value for name, value in os.environ.items() if name not in keys.REQUIRED_SECRETS}
    environment.update(CONTROLPLANE_VAR_DIR=str(tmp_path / "var"), SECRET_KEY="set-by-operator")
    exports = subprocess.run(
        [sys.executable, "-m", "controlplane.keys"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "SECRET_KEY" not in exports
    assert f"export AUDIT_HMAC_KEY={first['AUDIT_HMAC_KEY']}" in exports.splitlines()


def development_environment(tmp_path) -> dict[str, str]:
    environment = {name: value for name, value in os.environ.items() if name not in keys.CHECKED_SECRETS}
    environment.update(
        DJANGO_SETTINGS_MODULE="controlplane.settings",
        DEBUG="0",
        DATABASE_URL="",
        REDIS_URL="",
        CONTROLPLANE_VAR_DIR=str(tmp_path),
    )
    return environment


@pytest.mark.parametrize(
    "command",
    [
        [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", "0", "controlplane.asgi:application"],
        [str(BIN / "celery"), "-A", "controlplane", "worker", "--pool=solo"],
        [str(BIN / "celery"), "-A", "controlplane", "beat", "--schedule", "{tmp}/beat-schedule"],
        [sys.executable, "manage.py", "check", "--deploy"],
        [sys.executable, "manage.py", "migrate", "--no-input"],
    ],
    ids=["daphne", "worker", "beat", "check-deploy", "migrate"],
)
def test_every_process_refuses_development_secrets_outside_debug(tmp_path, command):
    command = [part.format(tmp=tmp_path) for part in command]
    refused = subprocess.run(
        command,
        cwd=ROOT,
        env=development_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
    )
    assert refused.returncode != 0
    output = refused.stdout + refused.stderr
    for name in keys.REQUIRED_SECRETS:
        assert f"{name} is a development placeholder" in output, output[-2000:]


def test_daphne_refuses_a_development_slack_signing_secret_outside_debug(tmp_path):
    environment = {**development_environment(tmp_path), **good_keys(), "SLACK_SIGNING_SECRET": "changeme"}
    refused = subprocess.run(
        [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", "0", "controlplane.asgi:application"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
    )
    assert refused.returncode != 0
    assert "SLACK_SIGNING_SECRET is too short" in refused.stdout + refused.stderr


def test_debug_keeps_the_development_defaults_working(tmp_path):
    checked = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**development_environment(tmp_path), "DEBUG": "1"},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
    )
    assert checked.returncode == 0, checked.stderr
