"""Our plan `tool_result` is what Mastra's own `submit_plan` tool tells the model, byte
for byte, for any feedback a reviewer can leave (newlines, Markdown, any script, blank
or whitespace-only), not just the three examples the end-to-end tests decide.

Mastra's tool (the real @mastra/core, `submitPlanTool` from @mastra/core/harness) runs
in one Node process for the whole module and is resumed once per example with the
`resume_data` our resume endpoint would send."""

from __future__ import annotations

import json
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.resume import tool_result
from approvals.states import Kind

# What the API accepts as text: no NUL (refused at the edge) and no lone surrogates.
FEEDBACK = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=300)


@pytest.fixture(scope="module")
def mastra_submit_plan(mastra_host):
    process = subprocess.Popen(
        ["node", "plan-texts.mjs"],
        cwd=mastra_host,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )

    def _resume(resume_data: dict) -> str:
        process.stdin.write(json.dumps(resume_data) + "\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    yield _resume
    process.stdin.close()
    process.wait(timeout=30)


@settings(max_examples=200, deadline=None)
@given(feedback=FEEDBACK, action=st.sampled_from(["approved", "rejected"]))
def test_mastras_tool_says_exactly_our_tool_result(mastra_submit_plan, feedback, action):
    # As agents/resume.py sends it: feedback only when there is some.
    resume_data = {
        "action": action,
        **({"feedback": feedback} if feedback else {}),
        "path": "plans/x.md",
        "title": "X",
        "plan": "# X\n",
    }
    assert mastra_submit_plan(resume_data) == tool_result(Kind.PLAN, action, feedback)
