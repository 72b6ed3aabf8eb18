"""An OpenAI Agents SDK host whose `needs_approval` tool is decided on the control plane.

Run by tests/interop/openai_agents/test_openai_agents.py with the interop virtualenv's
Python (the real `openai-agents` and the installed client), from a directory outside
the repository, so `agents` is the SDK. The model is the SDK's own ScriptedModel (its
`Model` interface, no network). Prints one JSON line: what happened.

    host.py run      --calls JSON [--final TEXT]      a run decided end to end
    host.py suspend  --calls JSON --state FILE        submit, save the run state, exit
    host.py resume   --state FILE [--final TEXT]      another process: decide, resume
The gated tool is wrapped with `controlled_tool`, so its body runs only through the
execution handshake (claim, verified grant, complete), keyed by the call id.
Environment: CONTROLPLANE_URL, CONTROLPLANE_TOKEN, CONTROLPLANE_PUBLIC_KEYS, TOOL_LOG (a
file each tool execution appends to), RUN_ID, TAMPER ("params": a man in the middle
rewrites each decided resume's params; "id:<request id>": it rewrites each submission
answer's id to that request's; "claim-params": it rewrites each claim answer's params),
KILL_IN_TOOL=1 (the tool kills its own process once it ran: a host that dies between
claim and complete), APPROVE_DIRECTLY=1 (`resume` approves every item itself, without
`decide_interruptions`: what the wrapped tool then runs is only what the server grants).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys

import httpx

from agents import Agent, Runner, RunState, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from hitl_controlplane.client import AsyncControlPlane, DecisionRefused
from hitl_controlplane.client.openai_agents import controlled_tool, decide_interruptions_async, interruption_action

set_tracing_disabled(True)


@function_tool(needs_approval=True)
def transfer_funds(amount: int, to: str) -> str:
    """Move money to a payee."""
    with open(os.environ["TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"amount": amount, "to": to}) + "\n")
    if os.environ.get("KILL_IN_TOOL"):
        os.kill(os.getpid(), signal.SIGKILL)  # claimed, ran, never completed
    return f"sent {amount} to {to}"


def make_agent(model: ScriptedModel, acp: AsyncControlPlane) -> Agent:
    """The agent with its gated tool wrapped: the tool body runs only through the execution handshake."""
    tool = controlled_tool(acp, transfer_funds, run_id=os.environ["RUN_ID"])
    return Agent(name="payments", instructions="Pay what the user asks.", model=model, tools=[tool])


class Tampering(httpx.AsyncHTTPTransport):
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        tamper = os.environ.get("TAMPER", "")
        if tamper.startswith("id:") and request.method == "POST" and request.url.path == "/api/v1/actions/":
            body = json.loads(await response.aread())
            body["id"] = tamper[3:]
            return httpx.Response(response.status_code, json=body)
        if tamper == "claim-params" and request.url.path.endswith("/claim/") and response.status_code == 200:
            body = json.loads(await response.aread())
            body["params"]["amount"] = 1_000_000
            return httpx.Response(response.status_code, json=body)
        if tamper != "params" or not request.url.path.endswith("/resume/"):
            return response
        body = json.loads(await response.aread())
        if body.get("decided") and "params" in (body.get("resume_data") or {}):
            body["resume_data"]["params"]["amount"] = 1_000_000
        return httpx.Response(response.status_code, json=body)


def client() -> AsyncControlPlane:
    transport = Tampering() if os.environ.get("TAMPER") else None
    return AsyncControlPlane(
        os.environ["CONTROLPLANE_URL"],
        os.environ["CONTROLPLANE_TOKEN"],
        poll_wait=5,
        retry_backoff=0.05,
        transport=transport,
    )


def model_saw(model: ScriptedModel) -> list[str]:
    """The tool outputs the model was given on its last call (function_call_output items)."""
    last = model.last_call
    items = last.input if last is not None and isinstance(last.input, list) else []
    return [
        item.get("output") for item in items if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


async def decide_and_finish(
    acp: AsyncControlPlane,
    agent: Agent,
    model: ScriptedModel,
    state: RunState,
    interruptions: list,
    run_id: str,
) -> dict:
    try:
        if os.environ.get("APPROVE_DIRECTLY"):
            for item in interruptions:
                state.approve(item)
            resumes = []
        else:
            resumes = await decide_interruptions_async(acp, state, interruptions, run_id=run_id, timeout=60)
        result = await Runner.run(agent, state)
    except DecisionRefused as refused:
        return {"refused": str(refused)}
    except Exception as failed:  # the SDK raises a tool's exception as UserError from it
        if isinstance(failed.__cause__, DecisionRefused):
            return {"refused": str(failed.__cause__)}
        raise
    return {
        "decisions": [r.resume_data["action"] for r in resumes],
        "verified": [r.decision is not None for r in resumes],
        "final_output": result.final_output,
        "model_saw": model_saw(model),
        "interruptions_left": len(result.interruptions),
    }


def script(calls: list[dict], final: str) -> list:
    return [
        [function_call("transfer_funds", call["args"], call_id=call["call_id"]) for call in calls],
        [assistant_message(final)],
    ]


async def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["run", "suspend", "resume"])
    parser.add_argument("--calls", default="[]")
    parser.add_argument("--final", default="done")
    parser.add_argument("--state")
    args = parser.parse_args()
    run_id = os.environ["RUN_ID"]

    async with client() as acp:
        if args.mode == "resume":
            model = ScriptedModel([[assistant_message(args.final)]])
            agent = make_agent(model, acp)
            with open(args.state, encoding="utf-8") as handle:
                state = await RunState.from_string(agent, handle.read())
            return await decide_and_finish(acp, agent, model, state, state.get_interruptions(), run_id)

        model = ScriptedModel(script(json.loads(args.calls), args.final))
        agent = make_agent(model, acp)
        result = await Runner.run(agent, "Pay the invoices.")
        interruptions = list(result.interruptions)
        if args.mode == "suspend":
            submitted = [await acp.submit_action(**interruption_action(item, run_id=run_id)) for item in interruptions]
            with open(args.state, "w", encoding="utf-8") as handle:
                handle.write(result.to_state().to_string())
            return {"submitted": [found["id"] for found in submitted]}
        return await decide_and_finish(acp, agent, model, result.to_state(), interruptions, run_id)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
    sys.stdout.flush()
