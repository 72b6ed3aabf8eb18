"""`make run` (runstack): daphne starts first; the worker, beat and the demo agent only
once /readyz answers. In the embedded stack their pushes go through daphne's relay at
most once, so one sent before daphne listens is lost (seen: "channel relay ...
Connection refused" twice on a warm start). The banner says where the key that
verifies audit exports is. Processes are stand-ins: what is tested is the order."""

from __future__ import annotations

import signal

import pytest
from django.core.management import call_command

from audit.signing import signer
from controlplane.management.commands import runstack


class Stopped(Exception):
    pass


class FakeProcess:
    returncode = None

    def poll(self):
        return None

    def send_signal(self, signum):
        self.returncode = -signum

    def wait(self, timeout=None):
        return self.returncode

    def kill(self):
        self.returncode = -9


@pytest.fixture
def stack(monkeypatch, settings, tmp_path):
    """Runs runstack with stand-in children; `/readyz` answers from the 3rd poll on."""
    settings.VAR_DIR = tmp_path  # the local witness's key is created there
    monkeypatch.delenv("AUDIT_WITNESSES", raising=False)
    events: list[str] = []
    polls = {"n": 0}

    def start(child):
        events.append(f"start {child.name}")
        child.process = FakeProcess()

    def ready(url):
        polls["n"] += 1
        events.append(f"readyz {'ok' if polls['n'] >= 3 else 'refused'}")
        return polls["n"] >= 3

    def sleep(seconds):
        polls["sleeps"] = polls.get("sleeps", 0) + 1
        if polls["sleeps"] >= 6:  # a few loops after the rest started: stop
            raise Stopped

    monkeypatch.setattr(runstack.Child, "start", start)
    monkeypatch.setattr(runstack, "_ready", ready)
    monkeypatch.setattr(runstack.time, "sleep", sleep)
    monkeypatch.setattr(runstack, "_prune_processed_messages", lambda: None)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    yield events
    signal.signal(signal.SIGINT, handlers[0])
    signal.signal(signal.SIGTERM, handlers[1])


def run(capsys, *args: str) -> str:
    with pytest.raises(Stopped):
        call_command("runstack", "--port", "8765", *args)
    return capsys.readouterr().out


def test_only_daphne_starts_before_readyz_answers(stack, capsys):
    run(capsys)
    first_ok = stack.index("readyz ok")
    assert stack[:first_ok] == ["start web", "readyz refused", "readyz refused"]
    assert stack[first_ok + 1 : first_ok + 4] == ["start worker", "start beat", "start demo-agent"]


def test_without_the_demo_agent_the_worker_and_beat_still_wait(stack, capsys):
    run(capsys, "--no-demo-agent")
    assert [e for e in stack if e.startswith("start")] == ["start web", "start worker", "start beat", "start witness"]
    assert stack.index("start worker") > stack.index("readyz ok")


def test_the_banner_says_where_the_export_verification_key_is(stack, capsys):
    out = run(capsys)
    key = signer().current
    assert f"hitl-audit-verify EXPORT.jsonl --public-key {key.public_text}" in out
    assert "http://127.0.0.1:8765/audit/" in out and "manage.py audit_public_key" in out


def test_the_local_witness_starts_last_unless_witnesses_are_configured(stack, capsys, monkeypatch):
    run(capsys, "--no-demo-agent", "--no-witness")
    assert "start witness" not in stack
    monkeypatch.setenv("AUDIT_WITNESSES", "someone-elses+00000000+AAAA")
    run(capsys, "--no-demo-agent")
    assert stack.count("start witness") == 0


def test_the_banner_says_who_to_sign_in_as_and_how_to_get_the_passwords_again(stack, capsys):
    out = run(capsys)
    assert "Sign in as `reviewer`" in out and "python manage.py demo_credentials" in out
    assert "Press Ctrl-C to stop everything." in out
