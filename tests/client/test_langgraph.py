"""A real LangGraph graph pauses on `interrupt(...)` with a plan; the host gets a
person's decision through the control plane and resumes with `Command(resume=...)`.

The reviewer decides through the reviewer API (session + CSRF) over HTTP.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TypedDict

import httpx
import pytest
from django.db import connection
from django.test import Client
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agents.resume import PLAN_APPROVED_TEXT
from approvals.models import ApprovalRequest
from approvals.states import State
from hitl_controlplane.client import ControlPlane
from tests.execution.harness import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class PlanState(TypedDict, total=False):
    task: str
    plan_path: str
    decision: dict
    outcome: str


def build_graph(plans_dir: Path):
    def write_plan(state: PlanState) -> PlanState:
        path = plans_dir / "auth.md"
        revision = "" if not path.exists() else "\n3. Handle token errors.\n"
        path.write_text(f"# {state['task']}\n\n1. Extract the token check.\n2. Add tests.\n{revision}")
        return {"plan_path": str(path)}

    def review(state: PlanState) -> PlanState:
        plan = Path(state["plan_path"]).read_text()
        # Mastra's suspend payload shape: {path, title, plan}.
        decision = interrupt({"path": state["plan_path"], "title": state["task"], "plan": plan})
        return {"decision": decision}

    def route(state: PlanState) -> str:
        return "implement" if state["decision"]["action"] == "approved" else "write_plan"

    def implement(state: PlanState) -> PlanState:
        return {"outcome": f"implemented {state['plan_path']}"}

    graph = StateGraph(PlanState)
    graph.add_node("write_plan", write_plan)
    graph.add_node("review", review)
    graph.add_node("implement", implement)
    graph.add_edge(START, "write_plan")
    graph.add_edge("write_plan", "review")
    graph.add_conditional_edges("review", route, ["implement", "write_plan"])
    graph.add_edge("implement", END)
    return graph.compile(checkpointer=InMemorySaver())


def reviewer_session(daphne_url: str, user) -> httpx.Client:
    """An HTTP client signed in as `user` with a CSRF cookie and header, like the browser."""
    django_client = Client()
    django_client.force_login(user)
    secret = "a" * 32  # any 32-character token the server accepts as the cookie's secret
    return httpx.Client(
        base_url=daphne_url,
        cookies={"sessionid": django_client.cookies["sessionid"].value, "csrftoken": secret},
        headers={"X-CSRFToken": secret},
        timeout=10,
    )


def decide_through_the_api(daphne_url: str, user, decisions: list[dict]) -> threading.Thread:
    """A reviewer who decides each newly pending plan in turn, over HTTP."""

    def run() -> None:
        try:
            with reviewer_session(daphne_url, user) as http:
                seen: set[str] = set()

                def newly_pending() -> list[dict]:
                    return [
                        r
                        for r in http.get("/api/v1/requests/", params={"state": State.PENDING_APPROVAL}).json()[
                            "results"
                        ]
                        if r["id"] not in seen
                    ]

                for decision in decisions:
                    pending = wait_for(newly_pending, what="the agent's next plan to be pending")
                    seen.add(pending[0]["id"])
                    response = http.post(
                        f"/api/v1/requests/{pending[0]['id']}/decisions/",
                        json={**decision, "revision": pending[0]["revision"]},
                    )
                    assert response.status_code == 200, response.text
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_langgraph_interrupt_is_resumed_with_the_reviewers_decision(daphne_server, token, people, tmp_path):
    graph = build_graph(tmp_path)
    config = {"configurable": {"thread_id": "thread-42"}}
    reviewer = decide_through_the_api(
        daphne_server.url,
        people["alice"],
        [
            {"decision": "reject", "feedback": "Add error handling steps"},
            {"decision": "approve"},
        ],
    )
    results = []
    with ControlPlane(daphne_server.url, token, poll_wait=5) as cp:
        state = graph.invoke({"task": "Refactor the auth module"}, config)
        while "__interrupt__" in state:
            suspended = state["__interrupt__"][0].value
            resume = cp.submit_plan(
                suspended["path"],
                plan=suspended["plan"],
                title=suspended["title"],
                thread_id="thread-42",
                run_id="run-1",
                timeout=30,
            )
            results.append(resume)
            state = graph.invoke(Command(resume=resume.resume_data), config)
    reviewer.join(timeout=25)

    rejected, approved = results
    assert rejected.resume_data["action"] == "rejected"
    assert rejected.resume_data["feedback"] == "Add error handling steps"
    assert "submit_plan" in rejected.tool_result
    assert approved.tool_result == PLAN_APPROVED_TEXT
    assert state["outcome"] == f"implemented {tmp_path / 'auth.md'}"
    assert state["decision"]["action"] == "approved"
    first, second = ApprovalRequest.objects.order_by("created_at")
    assert second.supersedes_id == first.pk  # the revised plan is the next revision of the rejected one
    assert "Handle token errors" in second.plan_markdown and second.thread_id == "thread-42"
