"""Shapes of what agents send and what the API answers."""

from __future__ import annotations

import re

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals.errors import INVALID_ACTION_TYPE
from approvals.models import ACTION_DECISIONS
from approvals.policy.rules.names import ActionTypeError, parse_action_type
from approvals.states import State
from controlplane.http.fields import BoundedJSONObject, json_size

_HEADING = re.compile(r"^\s{0,3}#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def title_from_markdown(markdown: str, fallback: str) -> str:
    """The first Markdown heading's text, else `fallback`."""
    match = _HEADING.search(markdown)
    return (match.group(1).strip() if match else fallback)[:500]


# The agent's own account of its call: sized so a card stays readable and a reason
# cannot bury the facts beneath it.
REASON_MAX_CHARS = 2000
CONTEXT_MAX_LINKS = 10
CONTEXT_MAX_TURNS = 20
TURN_MAX_CHARS = 4000


class ContextLinkSerializer(serializers.Serializer):
    # DRF's serializer metaclass pops declared fields: `label` never shadows Field.label (the stubs think it does).
    label = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")  # type: ignore[assignment]
    url = serializers.CharField(
        max_length=2000,
        help_text="Shown as a link only when it is http(s); anything else shows as text.",
    )


class ContextTurnSerializer(serializers.Serializer):
    role = serializers.CharField(max_length=40, help_text="Who spoke, e.g. user, assistant, tool.")
    text = serializers.CharField(max_length=TURN_MAX_CHARS, trim_whitespace=False)


class ContextSerializer(serializers.Serializer):
    """Links to the run or thread, and the last few conversation turns, as the agent tells them."""

    # many_init hands max_length to the ListSerializer (both lines); the stubs' __init__ lacks it.
    links = ContextLinkSerializer(many=True, required=False, default=list, max_length=CONTEXT_MAX_LINKS)  # type: ignore[call-arg]
    turns = ContextTurnSerializer(many=True, required=False, default=list, max_length=CONTEXT_MAX_TURNS)  # type: ignore[call-arg]

    def to_internal_value(self, data):
        if isinstance(data, dict) and (unknown := sorted(set(data) - {"links", "turns"})):
            raise serializers.ValidationError(
                {key: "Unknown key: context takes `links` and `turns`." for key in unknown}, code="unknown_key"
            )
        return super().to_internal_value(data)


class _AgentClaims(serializers.Serializer):
    reason = serializers.CharField(
        max_length=REASON_MAX_CHARS,
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        help_text="Why the agent wants this, in its own words (plain text). Reviewers see it labelled "
        "as the agent's claim.",
    )
    # DRF's serializer metaclass pops declared fields: `context` never shadows Field.context (the stubs think it does).
    context = ContextSerializer(  # type: ignore[assignment]
        required=False,
        help_text=f"`links` (at most {CONTEXT_MAX_LINKS}, {{label, url}}) to the run or thread, and the last "
        f"conversation `turns` (at most {CONTEXT_MAX_TURNS}, {{role, text}}).",
    )


class _CorrelationFields(_AgentClaims):
    run_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    thread_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    resource_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    tool_call_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    batch_id = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        default="",
        help_text="Groups the requests one agent step submitted together (e.g. the interrupt id); "
        "the queue shows them as one batch. Filter with `?batch=`.",
    )
    idempotency_key = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=False,
        help_text="Scoped to the agent; the Idempotency-Key header wins when both are given.",
    )
    callback_url = serializers.URLField(
        max_length=2000,
        required=False,
        allow_blank=False,
        help_text="Receives the decision as a signed POST; must be on the outbound allow-list.",
    )


@extend_schema_field({"type": "string", "maxLength": 200, "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$"})
class _ActionTypeField(serializers.CharField):
    """The documented syntax; the server also normalizes what surrounds it (see `approvals.policy.rules.names`)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        try:
            parse_action_type(value)
        except ActionTypeError as error:
            raise serializers.ValidationError(str(error), code=INVALID_ACTION_TYPE) from None
        return value


class ActionSubmissionSerializer(_CorrelationFields):
    action_type = _ActionTypeField(
        max_length=200,
        trim_whitespace=False,
        help_text="Letters, digits, `_`, `-` and `.` (e.g. `send_email`, `github.create_issue`); normalized "
        "(Unicode NFKC, case-folded, surrounding junk stripped) before any rule reads it.",
    )
    target = BoundedJSONObject(max_bytes_setting="API_MAX_PARAMS_BYTES", required=False, default=dict)
    params = BoundedJSONObject(max_bytes_setting="API_MAX_PARAMS_BYTES", required=False, default=dict)
    declared = BoundedJSONObject(
        max_bytes_setting="API_MAX_PARAMS_BYTES",
        required=False,
        default=dict,
        help_text="What the agent says about its own call; rules read it only if they trust it.",
    )
    allowed_decisions = serializers.ListField(
        child=serializers.ChoiceField(choices=list(ACTION_DECISIONS)),
        min_length=1,
        max_length=4,
        required=False,
        help_text="What the agent's host can apply (LangChain HITL's `allowed_decisions`); default "
        "`[approve, edit, reject]`. Leave out `edit` where your host runs the call only as submitted "
        "(Mastra's `approveToolCall` carries no arguments): reviewers are then offered no edit. "
        "`respond`: a reviewer may reply in place of the tool. Any other "
        "decision is refused with 422 `decision_not_allowed` (a person may always reject).",
    )

    def validate_allowed_decisions(self, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))  # one each, in the order given


class PlanSubmissionSerializer(_CorrelationFields):
    path = serializers.CharField(
        max_length=1000, help_text="Where the agent wrote the plan, e.g. .mastracode/plans/x.md"
    )
    title = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    plan = serializers.CharField(help_text="The plan's Markdown (the host read the file).", trim_whitespace=False)

    def validate_plan(self, value: str) -> str:
        limit = settings.API_MAX_PLAN_CHARS
        if len(value) > limit:
            raise serializers.ValidationError(f"Plans are limited to {limit} characters.", code="too_large")
        if not value.strip():
            raise serializers.ValidationError("The plan is empty.", code="blank")
        return value


class SuspensionSubmissionSerializer(_CorrelationFields):
    """A workflow step paused for a typed answer (Mastra's `suspend()` / `resume()`)."""

    title = serializers.CharField(max_length=500)
    summary = serializers.CharField(max_length=10000, required=False, allow_blank=True, default="")
    workflow_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    step_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    action_type = _ActionTypeField(
        max_length=200,
        trim_whitespace=False,
        required=False,
        help_text="What rules match on; `<workflow_id>.<step_id>` when not given.",
    )
    suspend_payload = BoundedJSONObject(
        max_bytes_setting="API_MAX_PARAMS_BYTES",
        help_text="What the step suspended with; rules read it as `params.*`, reviewers see it on the card.",
    )
    resume_schema = BoundedJSONObject(
        max_bytes_setting="API_MAX_PARAMS_BYTES",
        help_text="JSON Schema (draft 2020-12 by default, or draft-07 by `$schema`) of the answer, `type: object`; "
        "local `$ref`s only; patterns must be RE2 syntax.",
    )

    def validate(self, attrs):
        if not attrs.get("action_type"):
            workflow_id, step_id = attrs.get("workflow_id", ""), attrs.get("step_id", "")
            if not (workflow_id and step_id):
                raise serializers.ValidationError(
                    {"action_type": "Give action_type, or workflow_id and step_id to make it from."}, code="required"
                )
            try:
                parse_action_type(f"{workflow_id}.{step_id}")
            except ActionTypeError as error:
                raise serializers.ValidationError(
                    {"action_type": f"{workflow_id}.{step_id} is not a valid action type ({error}); give action_type."},
                    code=INVALID_ACTION_TYPE,
                ) from None
            attrs["action_type"] = f"{workflow_id}.{step_id}"
        return attrs


class CancelSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class ClaimSerializer(serializers.Serializer):
    nonce = serializers.RegexField(
        r"^[A-Za-z0-9_-]{22,128}$",
        help_text="Fresh per claim (32 random bytes, base64url without padding): the signed grant binds it, "
        "so a grant handed to one process cannot be replayed to another.",
    )
    target_hash = serializers.RegexField(
        r"^[0-9a-f]{64}$",
        required=False,
        help_text="sha256 of the target as the agent sees it now (canonical JSON); a mismatch refuses the claim.",
    )


class CompleteSerializer(serializers.Serializer):
    token = serializers.CharField(max_length=200, help_text="The grant token the claim returned.")
    succeeded = serializers.BooleanField()
    result = serializers.JSONField(required=False, allow_null=True, default=None)
    error = serializers.CharField(max_length=10000, required=False, allow_blank=True, default="")

    def validate_result(self, value):
        if value is not None and json_size(value) > settings.API_MAX_PARAMS_BYTES:
            raise serializers.ValidationError("The result is too large.", code="too_large")
        return value


class SignedGrantSerializer(serializers.Serializer):
    """The grant v1 document (hitl_controlplane.grants), for the schema."""

    type = serializers.ChoiceField(choices=["hitl-controlplane/grant"])
    v = serializers.IntegerField()
    request_id = serializers.UUIDField()
    revision = serializers.IntegerField()
    agent = serializers.DictField(help_text="`{id, name}`: the agent the request belongs to.")
    action_type = serializers.CharField()
    params_sha256 = serializers.CharField(help_text="SHA-256 of the granted params' RFC 8785 bytes.")
    idempotency_key = serializers.CharField()
    nonce = serializers.CharField(help_text="The claim's nonce.")
    attempt = serializers.IntegerField()
    lease_until = serializers.CharField(help_text="UTC, ISO 8601 with microseconds.")


class GrantSignatureSerializer(serializers.Serializer):
    algorithm = serializers.ChoiceField(choices=["ed25519"])
    key_id = serializers.CharField()
    signed = SignedGrantSerializer()
    signature = serializers.CharField(
        help_text="base64url Ed25519 signature over `hitl-controlplane grant v1\\0` + the canonical document."
    )


class GrantSerializer(serializers.Serializer):
    request_id = serializers.UUIDField()
    token = serializers.CharField(help_text="Single use; send it to renew/ and complete/.")
    idempotency_key = serializers.CharField(help_text="Carry this on the side effect so a retry cannot repeat it.")
    params = serializers.JSONField(help_text="Exactly the approved params.")
    lease_until = serializers.DateTimeField()
    attempt = serializers.IntegerField(help_text="1 for the first claim.")
    revision = serializers.IntegerField(help_text="The approved revision.")
    grant_signature = GrantSignatureSerializer(
        help_text="The server's signature over the grant (audit signing key): verify it, and that it binds the "
        "decision's request, revision and params and your nonce, before running anything."
    )


class RenewSerializer(serializers.Serializer):
    token = serializers.CharField(max_length=200, help_text="The grant token the claim returned.")


class LeaseSerializer(serializers.Serializer):
    request_id = serializers.UUIDField()
    lease_until = serializers.DateTimeField()


@extend_schema_field(
    {
        # anyOf, not oneOf: a suspension's answer is any object, so an action's matches both.
        "anyOf": [
            {
                "type": "object",
                "description": "Actions and plans.",
                "required": ["action"],
                "properties": {
                    "action": {"type": "string", "enum": ["approved", "rejected", "responded"]},
                    "feedback": {"type": "string"},
                    "message": {
                        "type": "string",
                        "description": "With `responded`: the reviewer's reply, for "
                        "the model in place of the tool's result.",
                    },
                    "path": {"type": "string"},
                    "title": {"type": "string"},
                    "plan": {"type": "string"},
                    "params": {"type": "object"},
                },
            },
            {
                "type": "object",
                "description": "An approved suspension: the reviewers' answer exactly as validated "
                "against its resume schema (pass it to `run.resume({step, resumeData})`).",
            },
        ],
        "nullable": True,
    }
)
class _ResumeDataField(serializers.JSONField):
    """Documents the two shapes `resume_data` takes."""


class _SignedAgentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class SignedDecisionSerializer(serializers.Serializer):
    """The signed decision document, v2 (docs/agents.md; hitl_controlplane.decisions)."""

    type = serializers.ChoiceField(choices=["hitl-controlplane/decision"])
    v = serializers.IntegerField(help_text="2.")
    kind = serializers.ChoiceField(choices=["action", "plan", "suspension"])
    agent = _SignedAgentSerializer(help_text="The agent whose token submitted the request.")
    request_id = serializers.UUIDField()
    revision = serializers.IntegerField()
    action_type = serializers.CharField(allow_blank=True, help_text="As the server normalized it.")
    idempotency_key = serializers.CharField(allow_null=True, help_text="The submission's key; null without one.")
    tool_call_id = serializers.CharField(allow_blank=True)
    submitted_sha256 = serializers.CharField(
        help_text="sha256 of the RFC 8785 bytes of what the agent submitted "
        "(params; a plan's {path, plan}; a suspend payload)."
    )
    verdict = serializers.CharField()
    payload_sha256 = serializers.CharField(
        allow_null=True,
        help_text="sha256 of the RFC 8785 bytes of what the "
        "agent acts on (approved params or plan); null for a rejection.",
    )
    tool_result_sha256 = serializers.CharField(allow_null=True, help_text="sha256 of the UTF-8 `tool_result` text.")
    execute_by = serializers.CharField(allow_null=True)


class DecisionSignatureSerializer(serializers.Serializer):
    algorithm = serializers.ChoiceField(choices=["ed25519"])
    key_id = serializers.CharField()
    signed = SignedDecisionSerializer()
    signature = serializers.CharField(help_text="base64url Ed25519 signature over the canonical signed document.")


class ResumeSerializer(serializers.Serializer):
    request_id = serializers.UUIDField()
    state = serializers.ChoiceField(choices=State.choices)
    decided = serializers.BooleanField()
    resume_data = _ResumeDataField(allow_null=True)
    tool_result = serializers.CharField(allow_null=True)
    decision_signature = DecisionSignatureSerializer(
        required=False,
        help_text="Decided requests: the server's Ed25519 signature binding this decision to the "
        "exact call (hitl_controlplane.decisions). Verify it with `manage.py audit_public_key` before acting.",
    )
    feedback = serializers.CharField(
        required=False, help_text="Suspensions only: why it ended without an answer (rejected, expired, cancelled)."
    )
