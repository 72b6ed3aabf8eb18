"""How the gateway reads a tool through the policy, without a server in between.

A tool is listed unless every call of it is prohibited; its annotations are
stored as `declared.*`, and they never lower the risk a call is classified at.
"""

from __future__ import annotations

import mcp_types as types
import pytest

from agents.mcp_gateway import calls
from approvals import policy
from approvals.people import Person
from approvals.states import State

pytestmark = pytest.mark.django_db


def tool(name: str, **hints) -> types.Tool:
    return types.Tool(
        name=name,
        description=f"The {name} tool.",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        annotations=types.ToolAnnotations(**hints) if hints else None,
    )


def save(admin_user, *rules: dict) -> None:
    policy.save_rules(list(rules), actor=Person(admin_user), note="gateway policy")


def test_a_tool_prohibited_for_every_call_is_left_out_and_one_prohibited_for_some_is_listed(admin_user):
    save(
        admin_user,
        {"name": "no_wipes", "priority": 1, "action_type": "files.wipe", "risk_level": "prohibited"},
        {
            "name": "no_root_deletes",
            "priority": 2,
            "action_type": "files.remove",
            "risk_level": "prohibited",
            "conditions": [{"path": "params.path", "op": "eq", "value": "/"}],
        },
    )

    listed = calls.listed_tools("files", [tool("wipe"), tool("remove"), tool("read", read_only_hint=True)])

    assert [listed_tool.name for listed_tool in listed] == ["files.remove", "files.read"]
    assert listed[1].annotations.read_only_hint is True and listed[1].description == "The read tool."


def test_hints_are_stored_with_the_specs_cautious_defaults_for_those_left_out():
    assert calls.declared_hints(tool("read", read_only_hint=True)) == {
        "readOnlyHint": True,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }


def test_a_hint_that_would_lower_the_risk_is_not_what_the_call_is_classified_with(admin_user, agent):
    """A rule trusting `declared.readOnlyHint` would make the call low; an upstream may lie."""
    save(
        admin_user,
        {
            "name": "read_only_is_low",
            "priority": 1,
            "action_type": "files.*",
            "risk_level": "low",
            "trusts_declared": True,
            "conditions": [{"path": "declared.readOnlyHint", "op": "eq", "value": True}],
        },
        {"name": "files_high", "priority": 2, "action_type": "files.*", "risk_level": "high"},
    )

    request = calls.submit_call(agent, "files", tool("erase", read_only_hint=True), {"path": "/srv"})

    assert request.state == State.PENDING_APPROVAL and request.risk_level == "high"
    assert request.declared == calls.HINT_DEFAULTS


def test_a_hint_that_raises_the_risk_is_kept(admin_user, agent):
    save(
        admin_user,
        {
            "name": "destructive_is_critical",
            "priority": 1,
            "action_type": "files.*",
            "risk_level": "critical",
            "trusts_declared": True,
            "conditions": [{"path": "declared.destructiveHint", "op": "eq", "value": True}],
        },
        {"name": "files_low", "priority": 2, "action_type": "files.*", "risk_level": "low"},
    )

    request = calls.submit_call(agent, "files", tool("shred", destructive_hint=True), {"path": "/srv"})

    assert request.risk_level == "critical" and request.declared["destructiveHint"] is True


def test_the_tools_definition_is_digested_into_the_target_so_a_changed_definition_is_another_target():
    before = calls.target_for("files", tool("read"))
    after = calls.target_for("files", tool("read").model_copy(update={"description": "Now also deletes."}))

    assert before["tool"] == "read" and before["mcp_server"] == "files"
    assert before["definition_sha256"] != after["definition_sha256"]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [({"path": "a\x00b"}, "NUL"), ({"path": "x" * 70_000}, "larger than")],
)
def test_arguments_no_agent_may_send_are_refused_before_any_request_exists(agent, arguments, says):
    with pytest.raises(calls.ArgumentsRefused, match=says):
        calls.submit_call(agent, "files", tool("read"), arguments)
