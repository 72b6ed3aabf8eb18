"""What the TypeScript framework hosts' live tests share (clients/typescript/hosts/<framework>).

Each host is a node script (`scripts/agent.mjs`) run in two phases, each its own process:
`start` runs the framework until it stops for an approval and submits the call; `resume`
turns the decision into the framework's answer and lets the framework run the tool, whose
body goes through the handshake. The script reports JSON lines; `Host.next_event` reads them.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path

from approvals import policy
from approvals.models import ApprovalRequest, RiskRule
from approvals.people import Person
from audit.models import AuditEvent

HOSTS = Path(__file__).resolve().parents[2] / "clients" / "typescript" / "hosts"
# Bounds how long a broken host can hang a test; no assertion depends on timing.
HANG_GUARD_SECONDS = 120

TRANSFER = {
    "name": "transfer_one_person",
    "priority": 5,
    "action_type": "transfer_funds",
    "risk_level": "high",
    "required_approvals": 1,
    "editable_params": ["amount"],
    "conditions": [],
}


class Host:
    """One node process of the host; `next_event(*names)` reads its JSON lines in order."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            ["node", "scripts/agent.mjs"],
            cwd=folder,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def next_event(self, *names: str) -> dict:
        line = self._lines.get(timeout=HANG_GUARD_SECONDS)
        if line is None:
            self.process.wait(timeout=HANG_GUARD_SECONDS)
            stderr = self.process.stderr.read() if self.process.stderr else ""
            raise AssertionError(f"the host exited ({self.process.returncode}) before {names}:\n{stderr}")
        event = json.loads(line)
        assert event["event"] in names, event
        return event

    def finish(self) -> None:
        code = self.process.wait(timeout=HANG_GUARD_SECONDS)
        stderr = self.process.stderr.read() if self.process.stderr else ""
        assert code == 0, stderr

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def verbs(request_id: str) -> set[str]:
    return set(AuditEvent.objects.filter(request_id=request_id).values_list("verb", flat=True))


class HostRuns:
    """Starts a host's phases against one server as the test's agent; `stop_all` kills
    whatever is still running when the test ends (a host killed on purpose included)."""

    def __init__(self, folder: Path, *, url: str, token: str, public_keys: str, state_dir: Path) -> None:
        self.folder, self.url, self.state_dir = folder, url, state_dir
        self.env = {
            "CONTROLPLANE_TOKEN": token,
            "CONTROLPLANE_PUBLIC_KEYS": public_keys,
            "CONTROLPLANE_AGENT": "mail-bot",
        }
        self.started: list[Host] = []

    def __call__(self, phase: str, run_id: str, url: str | None = None, **env: str) -> Host:
        process = Host(
            self.folder,
            {
                **self.env,
                "CONTROLPLANE_URL": url or self.url,
                "PHASE": phase,
                "RUN_ID": run_id,
                "STATE_FILE": str(self.state_dir / f"{run_id}.state.json"),
                **env,
            },
        )
        self.started.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.started:
            process.stop()


def start_until_interrupted(run: HostRuns, run_id: str) -> str:
    """The run interrupted, its call submitted, the state saved: the request's id."""
    start = run("start", run_id)
    interrupted = start.next_event("interrupted")
    start.finish()
    assert interrupted["callIds"] == ["call_7"]
    (request_id,) = interrupted["ids"]
    request = ApprovalRequest.objects.get(pk=request_id)
    assert request.state == "pending_approval" and request.idempotency_key == f"{run_id}:call_7"
    return request_id


def save_transfer_rule(admin_user) -> RiskRule:
    return policy.save_rule(TRANSFER, actor=Person(admin_user), note="one-person transfers")
