"""Shapes of what agents send and what the API answers."""

from __future__ import annotations

import json
import queue
import re
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals.errors import INVALID_ACTION_TYPE
from approvals.models import ApprovalRequest
from approvals.rules.names import ActionTypeError, parse_action_type
from approvals.states import Kind, RiskLevel, State

MASK = "••••••"
_HEADING = re.compile(r"^\s{0,3}#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def title_from_markdown(markdown: str, fallback: str) -> str:
    """The first Markdown heading's text, else `fallback`."""
    match = _HEADING.search(markdown)
    return (match.group(1).strip() if match else fallback)[:500]


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _holds_nul(value: Any) -> bool:
    """Does any key or string in `value` contain U+0000? PostgreSQL's jsonb cannot store it."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(key) or _holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


NUL_REFUSED = "Null characters are not allowed."  # DRF's CharField wording, for the same refusal


class _BoundedJSONField(serializers.JSONField):
    """A JSON object no larger than `max_bytes` once serialized."""

    def __init__(self, *, max_bytes_setting: str, **kwargs) -> None:
        self.max_bytes_setting = max_bytes_setting
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object.", code="not_an_object")
        limit = getattr(settings, self.max_bytes_setting)
        if _json_size(value) > limit:
            raise serializers.ValidationError(f"Must be at most {limit} bytes as JSON.", code="too_large")
        if _holds_nul(value):  # else the INSERT fails: a 500 instead of a 422
            raise serializers.ValidationError(NUL_REFUSED, code="null_characters_not_allowed")
        return value


class _CorrelationFields(serializers.Serializer):
    run_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    thread_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    resource_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    tool_call_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    idempotency_key = serializers.CharField(
        max_length=200, required=False, allow_blank=False,
        help_text="Scoped to the agent; the Idempotency-Key header wins when both are given.",
    )
    callback_url = serializers.URLField(
        max_length=2000, required=False, allow_blank=False,
        help_text="Receives the decision as a signed POST; must be on the outbound allow-list.",
    )


@extend_schema_field({"type": "string", "maxLength": 200, "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$"})
class _ActionTypeField(serializers.CharField):
    """The documented syntax; the server also normalizes what surrounds it (see `approvals.rules.names`)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        try:
            parse_action_type(value)
        except ActionTypeError as error:
            raise serializers.ValidationError(str(error), code=INVALID_ACTION_TYPE) from None
        return value


class ActionSubmissionSerializer(_CorrelationFields):
    action_type = _ActionTypeField(
        max_length=200, trim_whitespace=False,
        help_text="Letters, digits, `_`, `-` and `.` (e.g. `send_email`, `github.create_issue`); normalized "
                  "(Unicode NFKC, case-folded, surrounding junk stripped) before any rule reads it.",
    )
    target = _BoundedJSONField(max_bytes_setting="API_MAX_PARAMS_BYTES", required=False, default=dict)
    params = _BoundedJSONField(max_bytes_setting="API_MAX_PARAMS_BYTES", required=False, default=dict)
    declared = _BoundedJSONField(
        max_bytes_setting="API_MAX_PARAMS_BYTES", required=False, default=dict,
        help_text="What the agent says about its own call; rules read it only if they trust it.",
    )


class PlanSubmissionSerializer(_CorrelationFields):
    path = serializers.CharField(max_length=1000, help_text="Where the agent wrote the plan, e.g. .mastracode/plans/x.md")
    title = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    plan = serializers.CharField(help_text="The plan's Markdown (the host read the file).", trim_whitespace=False)

    def validate_plan(self, value: str) -> str:
        limit = settings.API_MAX_PLAN_CHARS
        if len(value) > limit:
            raise serializers.ValidationError(f"Plans are limited to {limit} characters.", code="too_large")
        if not value.strip():
            raise serializers.ValidationError("The plan is empty.", code="blank")
        return value


class CancelSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class ClaimSerializer(serializers.Serializer):
    target_hash = serializers.RegexField(
        r"^[0-9a-f]{64}$", required=False,
        help_text="sha256 of the target as the agent sees it now (canonical JSON); a mismatch refuses the claim.",
    )


class CompleteSerializer(serializers.Serializer):
    token = serializers.CharField(max_length=200, help_text="The grant token the claim returned.")
    succeeded = serializers.BooleanField()
    result = serializers.JSONField(required=False, allow_null=True, default=None)
    error = serializers.CharField(max_length=10000, required=False, allow_blank=True, default="")

    def validate_result(self, value):
        if value is not None and _json_size(value) > settings.API_MAX_PARAMS_BYTES:
            raise serializers.ValidationError("The result is too large.", code="too_large")
        if _holds_nul(value):
            raise serializers.ValidationError(NUL_REFUSED, code="null_characters_not_allowed")
        return value


class GrantSerializer(serializers.Serializer):
    request_id = serializers.UUIDField()
    token = serializers.CharField(help_text="Single use; send it to complete/.")
    idempotency_key = serializers.CharField(help_text="Carry this on the side effect so a retry cannot repeat it.")
    params = serializers.JSONField(help_text="Exactly the approved params.")
    lease_until = serializers.DateTimeField()


class StepUpSerializer(serializers.Serializer):
    """A proof of presence made for this one decision (DESIGN.md "Guards")."""

    method = serializers.ChoiceField(choices=["password"], help_text="How the reviewer proves presence.")
    password = serializers.CharField(max_length=4096, write_only=True, trim_whitespace=False,
                                     help_text="The reviewer's password, checked for this decision only.")


class DecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    feedback = serializers.CharField(max_length=10000, required=False, allow_blank=True, default="")
    edits = _BoundedJSONField(
        max_bytes_setting="API_MAX_PARAMS_BYTES", required=False,
        help_text="Approve with these params changed (only those the rule marks editable).",
    )
    revision = serializers.IntegerField(
        min_value=1, required=False,
        help_text="The revision you looked at; if the request moved on, nothing is recorded (409 revision_changed).",
    )
    step_up = StepUpSerializer(
        required=False,
        help_text="Required to approve where the deciding level needs it (critical, or a rule that asks); "
                  "without it the answer is 403 step_up_required.",
    )

    def validate(self, attrs):
        if attrs.get("edits") and attrs["decision"] != "approve":
            raise serializers.ValidationError({"edits": "Edits go with an approval."}, code="edits_with_reject")
        return attrs


class BatchItemSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    revision = serializers.IntegerField(min_value=1, help_text="The revision you looked at.")


class BatchDecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    requests = BatchItemSerializer(many=True, min_length=1, max_length=100)
    feedback = serializers.CharField(max_length=10000, required=False, allow_blank=True, default="")
    step_up = StepUpSerializer(
        required=False,
        help_text="One proof for the whole batch: it covers exactly these (request, revision, decision) triples.",
    )

    def validate_requests(self, value):
        ids = [item["id"] for item in value]
        if len(set(ids)) != len(ids):
            raise serializers.ValidationError("A request appears twice in the batch.", code="duplicate")
        return value


class ResumeDataSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["approved", "rejected"])
    feedback = serializers.CharField(required=False)
    path = serializers.CharField(required=False)
    title = serializers.CharField(required=False, allow_blank=True)
    plan = serializers.CharField(required=False)
    params = serializers.JSONField(required=False, help_text="Actions: exactly the approved params.")


class ResumeSerializer(serializers.Serializer):
    request_id = serializers.UUIDField()
    state = serializers.ChoiceField(choices=State.choices)
    decided = serializers.BooleanField()
    resume_data = ResumeDataSerializer(allow_null=True)
    tool_result = serializers.CharField(allow_null=True)


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.JSONField(required=False)


class ApprovalRequestSerializer(serializers.ModelSerializer):
    """A request as agents and reviewers read it. `state` is the effective state."""

    state = serializers.SerializerMethodField()
    stored_state = serializers.CharField(source="state")
    risk_level = serializers.ChoiceField(choices=RiskLevel.choices, allow_blank=True)
    kind = serializers.ChoiceField(choices=Kind.choices)
    params = serializers.SerializerMethodField()
    rule = serializers.SerializerMethodField()
    policy_version = serializers.SerializerMethodField()
    plan = serializers.SerializerMethodField()
    supersedes = serializers.SerializerMethodField()
    agent = serializers.CharField(source="agent.name")
    revision = serializers.IntegerField(source="current_revision")
    decided_by = serializers.CharField(source="decided_by_label")

    class Meta:
        model = ApprovalRequest
        fields = [
            "id", "kind", "state", "stored_state", "agent", "action_type", "target", "target_hash", "params",
            "declared", "impact", "revision", "risk_level", "rule", "policy_version", "required_approvals",
            "quorum_reachable", "decide_by", "execute_by", "created_at", "decided_at", "decided_by", "feedback",
            "resolution_code", "plan", "supersedes", "run_id", "thread_id", "resource_id", "tool_call_id",
            "idempotency_key", "result", "error", "finished_at",
        ]

    @extend_schema_field(serializers.ChoiceField(choices=State.choices))
    def get_state(self, obj: ApprovalRequest) -> str:
        return obj.effective_state

    @extend_schema_field(serializers.JSONField())
    def get_params(self, obj: ApprovalRequest) -> dict:
        """The current revision's params; reviewers see the rule's masked params masked."""
        # The caller's params (a submission it just wrote), else prefetched revisions
        # when the queryset has them (lists), else one query.
        cache = getattr(obj, "_prefetched_objects_cache", {}).get("revisions")
        if "params" in self.context:
            params = self.context["params"]
        elif cache is not None:
            params = next((r.params for r in cache if r.number == obj.current_revision), {})
        else:
            params = obj.current_params()
        masked = obj.classification.get("masked_params") or ()
        if self.context.get("mask") and masked:
            params = {key: (MASK if key in masked else value) for key, value in params.items()}
        return params

    @extend_schema_field(
        {"type": "object", "properties": {"name": {"type": "string", "nullable": True},
                                          "reason": {"type": "string"}}}
    )
    def get_rule(self, obj: ApprovalRequest) -> dict:
        return {"name": obj.rule_name or None, "reason": obj.classification.get("reason", "")}

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_policy_version(self, obj: ApprovalRequest) -> int | None:
        return obj.classification.get("policy_version")

    @extend_schema_field(
        {"type": "object", "nullable": True, "description": "The suspend payload, for plans.",
         "properties": {"path": {"type": "string"}, "title": {"type": "string"}, "plan": {"type": "string"}}}
    )
    def get_plan(self, obj: ApprovalRequest) -> dict | None:
        if obj.kind != Kind.PLAN:
            return None
        return {"path": obj.plan_path, "title": obj.plan_title, "plan": obj.plan_markdown}

    @extend_schema_field(
        {"type": "object", "nullable": True,
         "properties": {"id": {"type": "string", "format": "uuid"}, "state": {"type": "string"},
                        "feedback": {"type": "string"}}}
    )
    def get_supersedes(self, obj: ApprovalRequest) -> dict | None:
        previous = obj.supersedes
        if previous is None:
            return None
        return {"id": str(previous.pk), "state": previous.state, "feedback": previous.feedback}


# Building an ApprovalRequestSerializer's ~35 fields costs about 3 ms, twenty times
# what rendering one request costs (README "Performance"). `represent` keeps built
# serializers and reuses them: one serializer is used by one thread at a time (taken
# from the pool, put back after), and only its context changes between uses.
_idle_representers: queue.SimpleQueue = queue.SimpleQueue()


def represent(request_obj: ApprovalRequest, **context: Any) -> dict:
    """`ApprovalRequestSerializer(request_obj, context=context).data`, on a reused serializer."""
    try:
        serializer = _idle_representers.get_nowait()
    except queue.Empty:
        serializer = ApprovalRequestSerializer()
    try:
        serializer._context = context
        return serializer.to_representation(request_obj)
    finally:
        serializer._context = {}
        _idle_representers.put(serializer)
