"""A LangChain agent (real `HumanInTheLoopMiddleware`, scripted model) whose gated tool is wrapped
with `controlled_langchain_tool`, run as its own process on a checkpoint saved to a file:

    langchain_host.py start  --state FILE --mode batched|per_call   answer the interrupt, save, exit
    langchain_host.py resume --state FILE --mode batched|per_call   another process: restore, resume

`start` submits and waits for the decision (the test decides), then saves the checkpoint
and the resume value without resuming; each `resume` restores both and resumes.
Environment: CONTROLPLANE_URL, CONTROLPLANE_TOKEN, CONTROLPLANE_PUBLIC_KEYS, TOOL_LOG,
KILL_IN_TOOL=1 (the tool kills its own process once it ran). Prints one JSON line
(`{"refused": ...}` when the client raised DecisionRefused).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import signal
import sys

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from hitl_controlplane.client import ControlPlane, DecisionRefused
from hitl_controlplane.client.langchain_hitl import answer_interrupts
from hitl_controlplane.client.langchain_tools import controlled_langchain_tool
from tests.client.langgraph_host import load, save  # the same checkpoint file format

ARGS = {"amount": 75, "to": "acme"}


class ScriptedModel(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


@tool
def transfer_funds(amount: int, to: str) -> str:
    """Move money to a payee."""
    with open(os.environ["TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"amount": amount, "to": to}) + "\n")
    if os.environ.get("KILL_IN_TOOL"):
        os.kill(os.getpid(), signal.SIGKILL)  # claimed, ran, never completed
    return f"sent {amount} to {to}"


def build_agent(cp: ControlPlane, mode: str, saver):
    call = {"name": "transfer_funds", "args": ARGS, "id": "call_1"}
    model = ScriptedModel(messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="Paid.")]))
    middleware = HumanInTheLoopMiddleware(interrupt_on={"transfer_funds": True}, interrupt_mode=mode)
    wrapped = controlled_langchain_tool(cp, transfer_funds, thread_id=f"thread-{mode}")
    return create_agent(model, tools=[wrapped], middleware=[middleware], checkpointer=saver)


def main() -> dict:
    from langgraph.checkpoint.memory import InMemorySaver

    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["start", "resume"])
    parser.add_argument("--state", required=True)
    parser.add_argument("--interrupt-mode", default="batched")
    args = parser.parse_args()
    mode = args.interrupt_mode
    config = {"configurable": {"thread_id": f"thread-{mode}"}}
    with ControlPlane(os.environ["CONTROLPLANE_URL"], os.environ["CONTROLPLANE_TOKEN"], poll_wait=5) as cp:
        if args.mode == "start":
            saver = InMemorySaver()
            state = build_agent(cp, mode, saver).invoke({"messages": [("user", "Pay acme.")]}, config)
            resume = answer_interrupts(
                cp,
                state["__interrupt__"],
                thread_id=f"thread-{mode}",
                run_id=f"run-{mode}",
                timeout=30,
                claim=False,
                tool_calls=state["messages"][-1].tool_calls,
            )
            save(saver, args.state)
            with open(args.state + ".resume", "wb") as handle:
                pickle.dump(resume, handle)
            return {"resume": list(resume)}
        with open(args.state + ".resume", "rb") as handle:
            resume = pickle.load(handle)  # noqa: S301 - the test's own file
        state = build_agent(cp, mode, load(args.state)).invoke(Command(resume=resume), config)
        return {"model_read": [m.content for m in state["messages"] if isinstance(m, ToolMessage)]}


if __name__ == "__main__":
    try:
        printed = main()
    except DecisionRefused as refusal:  # the client refused what it was told: nothing ran, the test reads why
        printed = {"refused": str(refusal)}
    print(json.dumps(printed))
    sys.stdout.flush()
