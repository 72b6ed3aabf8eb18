"""The call a client made, as it knows it without trusting any answer from the network
(`SubmittedCall`), and the digest of what it submitted (`submitted_sha256`), which a signed
decision must name. `hitl_controlplane.decisions` (the signed document's specification)
re-exports these names.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from typing import Any

from .canonical import value_sha256

KINDS = ("action", "plan", "suspension")
# The action type every plan is stored under (approvals.services.submission.PLAN_ACTION_TYPE).
PLAN_ACTION_TYPE = "submit_plan"


def normalize_action_type(raw: str) -> str:
    """The action type as the server stores it: NFKC, surrounding non-letters/digits removed, case-folded.

    The same steps as the server's `parse_action_type` (which also refuses what is not
    a valid name; a refused name never reaches a decision), so a client compares the
    signed action type with the one it sent without trusting any answer for it.
    """
    text = unicodedata.normalize("NFKC", raw)
    start, end = 0, len(text)
    while start < end and unicodedata.category(text[start])[0] not in "LN":
        start += 1
    while end > start and unicodedata.category(text[end - 1])[0] not in "LN":
        end -= 1
    return text[start:end].casefold()


def _as_sent(value: Any) -> Any:
    """`value` as the server parses it from the JSON the client sends (tuples are lists, and so on)."""
    return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))


def submitted_value(kind: str, *, params: Any = None, path: str = "", plan: str = "") -> Any:
    """What an agent submitted, as `submitted_sha256` digests it.

    An action: its params (`{}` when none). A suspension: its suspend payload (pass it as
    `params`). A plan: `{path, plan}` (the path trimmed, as the API stores it; the title is
    a label the server derives from the plan's first heading when none is sent, so it is
    not part of it; the approved payload, which the agent reads back, includes it).
    """
    if kind == "plan":
        return {"path": path.strip(), "plan": plan}
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    return params or {}


def submitted_sha256(kind: str, **submitted: Any) -> str:
    """The digest of what was submitted (see `submitted_value`), computed on the JSON as sent."""
    digest = value_sha256(_as_sent(submitted_value(kind, **submitted)))
    if digest is None:  # submitted_value is a dict for every kind
        raise ValueError("nothing was submitted")
    return digest


@dataclass(frozen=True)
class SubmittedCall:
    """The call a client made, as it knows it without trusting any answer from the network.

    A decision is acted on only if its signed document names exactly this: `agent` (the
    agent's name; None leaves it unchecked), `kind`, `action_type` (normalized),
    `submitted_sha256`, `idempotency_key` and `tool_call_id` ("" when none was given).
    """

    kind: str
    action_type: str
    submitted_sha256: str
    idempotency_key: str | None
    tool_call_id: str = ""
    agent: str | None = None

    @classmethod
    def action(
        cls,
        action_type: str,
        params: Any,
        *,
        idempotency_key: str | None,
        tool_call_id: str | None = "",
        agent: str | None = None,
    ) -> SubmittedCall:
        return cls(
            kind="action",
            action_type=normalize_action_type(action_type),
            submitted_sha256=submitted_sha256("action", params=params),
            idempotency_key=_key(idempotency_key),
            tool_call_id=(tool_call_id or "").strip(),
            agent=agent,
        )

    @classmethod
    def plan(
        cls,
        path: str,
        plan: str,
        *,
        idempotency_key: str | None,
        tool_call_id: str | None = "",
        agent: str | None = None,
    ) -> SubmittedCall:
        return cls(
            kind="plan",
            action_type=PLAN_ACTION_TYPE,
            submitted_sha256=submitted_sha256("plan", path=path, plan=plan),
            idempotency_key=_key(idempotency_key),
            tool_call_id=(tool_call_id or "").strip(),
            agent=agent,
        )

    @classmethod
    def suspension(
        cls,
        action_type: str,
        suspend_payload: Any,
        *,
        idempotency_key: str | None,
        tool_call_id: str | None = "",
        agent: str | None = None,
    ) -> SubmittedCall:
        """`action_type`: the one given, else `<workflow_id>.<step_id>` (as the server names it)."""
        return cls(
            kind="suspension",
            action_type=normalize_action_type(action_type),
            submitted_sha256=submitted_sha256("suspension", params=suspend_payload),
            idempotency_key=_key(idempotency_key),
            tool_call_id=(tool_call_id or "").strip(),
            agent=agent,
        )

    def with_agent(self, agent: str | None) -> SubmittedCall:
        return self if agent is None else SubmittedCall(**{**self.__dict__, "agent": agent})


def _key(idempotency_key: str | None) -> str | None:
    return idempotency_key.strip() or None if idempotency_key is not None else None
