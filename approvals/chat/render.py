"""What a Slack message says about a request, within Slack's bounds: action, agent,
target, risk and matched rule, the params and impact as anyone may see them (through
`approvals.masking`, the one serialization point, so masked values are masked before a
character is cut), the deadline and the quorum. Long values are cut safely: never inside
an escape, never out of a code block, always saying so and pointing at the card."""

from __future__ import annotations

import json
import re
from typing import Any

from approvals.masking import shown_impact, shown_params
from approvals.models import ApprovalRequest
from approvals.services.guards import approvals_counted
from approvals.states import State

SECTION_MAX = 3000  # Slack refuses a section whose text is longer
TRUNCATED = "\n… (cut: {} more characters; open the card for all of it)"
_PARTIAL_ENTITY = re.compile(r"&[a-z]{0,4}$")


def escape(text: str) -> str:
    """Slack's mrkdwn escaping (the three characters it reads as markup)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fit(text: str, limit: int) -> str:
    """`text` (already escaped) cut to `limit` characters with a note saying how much was cut."""
    if len(text) <= limit:
        return text
    note_room = len(TRUNCATED.format(len(text)))
    kept = _PARTIAL_ENTITY.sub("", text[: max(0, limit - note_room)])
    return kept + TRUNCATED.format(len(text) - len(kept))


def code_section(title: str, data: Any, limit: int = SECTION_MAX) -> dict[str, Any]:
    """`data` as JSON in a code block, the whole section within `limit`."""
    body = escape(json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True, default=str))
    body = body.replace("```", "`\u200b``")  # a value cannot close the code block early
    frame = f"*{title}*\n```\n\n```"
    return section(f"*{title}*\n```\n{fit(body, limit - len(frame))}\n```")


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": fit(text, SECTION_MAX)}}


def deadline(request: ApprovalRequest) -> str:
    if request.decide_by is None:
        return "no deadline"
    epoch = int(request.decide_by.timestamp())
    return f"<!date^{epoch}^{{date_short_pretty}} {{time}}|{request.decide_by.isoformat()}>"


def describe(request: ApprovalRequest) -> list[dict[str, Any]]:
    """The sections that say what the request is (the buttons or the outcome follow)."""
    rule = escape(request.rule_name or "-")
    summary = (
        f"*{escape(request.action_type)}* from agent *{escape(request.agent.name)}*\n"
        f"Risk *{escape(request.risk_level)}*, rule `{rule}`\nDecide by {deadline(request)}"
    )
    if request.state == State.PENDING_APPROVAL:
        summary += f"\nApprovals: {approvals_counted(request)} of {request.required_approvals}"
    blocks = [section(summary)]
    if request.target:
        blocks.append(code_section("Target", request.target, 1000))
    blocks.append(code_section("Params", shown_params(request)))
    impact = shown_impact(request)
    if impact:
        blocks.append(code_section("Impact", impact, 1500))
    return blocks


AFTER_APPROVAL = (State.EXECUTING, State.SUCCEEDED, State.FAILED)


def outcome(request: ApprovalRequest) -> str:
    """Who decided and how: "approved by NAME" (and what the execution did since), "rejected
    by NAME", "expired", "cancelled by NAME"."""
    verb = State.APPROVED.value if request.state in AFTER_APPROVAL else str(request.state)
    said = f"{verb} by {escape(request.decided_by_label or 'the system')}"
    if request.state in AFTER_APPROVAL:
        said += f"; {request.state} since"
    return fit(said, SECTION_MAX)


def stub(request: ApprovalRequest, card_url: str) -> list[dict[str, Any]]:
    """What a channel is told: action type, risk, deadline and a link, nothing else (channel
    messages live in Slack's search and retention, read by people who may not view it)."""
    text = (
        f"A *{escape(request.risk_level)}* risk *{escape(request.action_type)}* waits for a decision, "
        f"by {deadline(request)}: <{escape(card_url)}|open it>"
    )
    return [section(text)]
