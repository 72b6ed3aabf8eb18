"""LangChain hosts as their own processes (tests/client/langchain_host.py) on one saved checkpoint.

`LangChainHost(server, token, key, tmp_path, mode)`: `start("start")` submits the gated
call and waits for the decision, `start("resume")` restores the checkpoint in another
process and resumes; `CONTROLPLANE_URL=...` among a start's keywords sends that process
through someone in between (tests/fixtures/typescript.RewritingProxy). A host the client
refused prints `{"refused": message}`; `tool_runs()` is what the tool really did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from approvals.models import ApprovalRequest
from tests.client.test_langgraph_tools import decide
from tests.execution.harness import wait_for
from tests.live import ROOT

LANGCHAIN_HOST = ROOT / "tests" / "client" / "langchain_host.py"
HANG_GUARD_SECONDS = 120


class LangChainHost:
    """langchain_host.py as its own process on the checkpoint file under `tmp_path`."""

    def __init__(self, server, token, key, tmp_path, mode: str) -> None:
        self.state = tmp_path / "checkpoint.pickle"
        self.tool_log = tmp_path / "tool-runs.jsonl"
        self.tool_log.touch()
        self.mode = mode
        self.run_id = f"run-{mode}"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": f"{ROOT}:{ROOT / 'clients' / 'python'}",
            "CONTROLPLANE_URL": server.url,
            "CONTROLPLANE_TOKEN": token,
            "CONTROLPLANE_PUBLIC_KEYS": key,
            "TOOL_LOG": str(self.tool_log),
        }
        self.cwd = tmp_path

    def start(self, command: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, str(LANGCHAIN_HOST), command, "--state", str(self.state), "--interrupt-mode", self.mode],
            cwd=self.cwd,
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(self, process: subprocess.Popen) -> dict:
        out, err = process.communicate(timeout=HANG_GUARD_SECONDS)
        assert process.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])

    def submitted(self) -> ApprovalRequest:
        [request] = wait_for(
            lambda: list(ApprovalRequest.objects.filter(run_id=self.run_id)), what="the call to be pending"
        )
        return request

    def started_and_decided(self, server_url: str, reviewer, *, decision: str = "approve", **env: str) -> tuple:
        """(the request, what the `start` process printed) once `reviewer` decided the call."""
        process = self.start("start", **env)
        request = self.submitted()
        decide(server_url, reviewer, str(request.pk), decision=decision)
        return request, self.finish(process)

    def started_and_approved(self, server_url: str, reviewer) -> ApprovalRequest:
        request, _ = self.started_and_decided(server_url, reviewer)
        return request

    def tool_runs(self) -> list[dict]:
        return [json.loads(line) for line in self.tool_log.read_text().splitlines()]
