"""Shapes of what reviewers send, and the documented shape of a request as the API
answers it (rendered by `representation.request_dict`)."""

from __future__ import annotations

from collections.abc import Sequence

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from controlplane.http.fields import BoundedJSONObject, WholeNumberField

from ..bounds import BOUNDS
from ..decide import STEP_UP_SECRETS
from ..models import ACTION_DECISIONS
from ..states import Kind, RiskLevel, State
from .representation import REQUEST_FIELDS, request_dict

REVISION = BOUNDS["revision"]

__all__ = [
    "ApprovalRequestSerializer",
    "BatchDecisionSerializer",
    "BatchDecisionsSerializer",
    "DecisionResultSerializer",
    "DecisionSerializer",
]


@extend_schema_field(
    {"type": "object", "properties": {"name": {"type": "string", "nullable": True}, "reason": {"type": "string"}}}
)
class _RuleField(serializers.JSONField):
    """The classifying rule and why it matched."""


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "description": "The suspend payload, for plans.",
        "properties": {"path": {"type": "string"}, "title": {"type": "string"}, "plan": {"type": "string"}},
    }
)
class _PlanField(serializers.JSONField):
    """A plan's suspend payload."""


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "state": {"type": "string"},
            "feedback": {"type": "string"},
        },
    }
)
class _SupersedesField(serializers.JSONField):
    """The rejected request this one revises."""


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "description": "Suspensions: the paused step, the schema its answer must satisfy, and the answer proposed "
        "for the current revision (the answer, once approved). The suspend payload is `params`.",
        "properties": {
            "workflow_id": {"type": "string"},
            "step_id": {"type": "string"},
            "title": {"type": "string"},
            "summary": {"type": "string"},
            "resume_schema": {"type": "object"},
            "answer": {"type": "object", "nullable": True},
        },
    }
)
class _SuspensionField(serializers.JSONField):
    """A suspension's step, schema and answer."""


class ApprovalRequestSerializer(serializers.Serializer):
    """A request as agents and people read it (the schema of `request_dict`)."""

    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=Kind.choices)
    state = serializers.ChoiceField(choices=State.choices, help_text="The effective state.")
    stored_state = serializers.ChoiceField(choices=State.choices)
    agent = serializers.CharField(help_text="The agent's name.")
    action_type = serializers.CharField()
    target = serializers.JSONField()
    target_hash = serializers.CharField()
    params = serializers.JSONField(help_text="The current revision's params; people see masked params masked.")
    declared = serializers.JSONField()
    reason = serializers.CharField(help_text="Why the agent says it wants this: its claim, not a checked fact.")
    # DRF's serializer metaclass pops declared fields: `context` never shadows Field.context (the stubs think it does).
    context = serializers.JSONField(  # type: ignore[assignment]
        help_text="The agent's `links` ({label, url}) and conversation `turns` "
        "({role, text}), as it sent them; `{}` when none."
    )
    impact = serializers.JSONField(help_text="Computed on the server, never taken from the agent.")
    revision = serializers.IntegerField()
    risk_level = serializers.ChoiceField(choices=RiskLevel.choices, allow_blank=True)
    rule = _RuleField()
    policy_version = serializers.IntegerField(allow_null=True)
    required_approvals = serializers.IntegerField()
    quorum_reachable = serializers.BooleanField()
    decide_by = serializers.DateTimeField(allow_null=True)
    execute_by = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    decided_by = serializers.CharField()
    feedback = serializers.CharField()
    resolution_code = serializers.CharField()
    plan = _PlanField(allow_null=True)
    supersedes = _SupersedesField(allow_null=True)
    suspension = _SuspensionField(allow_null=True)
    run_id = serializers.CharField()
    thread_id = serializers.CharField()
    resource_id = serializers.CharField()
    tool_call_id = serializers.CharField()
    idempotency_key = serializers.CharField(allow_null=True)
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField()
    finished_at = serializers.DateTimeField(allow_null=True)
    batch_id = serializers.CharField(help_text="The batch the agent submitted it in (empty: none).")
    allowed_decisions = serializers.ListField(
        child=serializers.ChoiceField(choices=list(ACTION_DECISIONS)),
        help_text="The decisions the agent's host can apply; others are refused (a person may always reject).",
    )

    class Meta:
        fields: Sequence[str] = REQUEST_FIELDS  # a subclass may list more

    def to_representation(self, instance) -> dict:
        # The real Field.context (the `context` field above is popped by the metaclass).
        return request_dict(instance, mask=self.context.get("mask", False))  # type: ignore[attr-defined]


class StepUpSerializer(serializers.Serializer):
    """A proof of presence made for this one decision (DESIGN.md "Guards")."""

    method = serializers.ChoiceField(
        choices=["password", "totp", "passkey", "provider"],
        help_text="How the reviewer proves presence: `passkey` once they have one, else `totp` (their "
        "authenticator app's current code) once they have one, else `provider` for someone who signs "
        "in only through an identity provider (a fresh sign-in there), else `password`; another is "
        "answered 403 step_up_required naming `details.method`.",
    )
    password = serializers.CharField(
        max_length=4096,
        write_only=True,
        trim_whitespace=False,
        required=False,
        help_text="With `password`: the reviewer's password, checked for this decision only.",
    )
    code = serializers.RegexField(
        r"^[0-9]{6}$",
        write_only=True,
        required=False,
        help_text="With `totp`: the code the app shows now; each code is accepted once.",
    )

    nonce = serializers.CharField(
        max_length=200,
        required=False,
        help_text="With `passkey` or `provider`: the nonce of the challenge from "
        "POST /api/v1/step-up/challenges/ (for `provider`, proven by the "
        "sign-in at the provider its `redirect` leads to).",
    )
    assertion = serializers.JSONField(
        required=False,
        help_text="With `passkey`: the WebAuthn assertion (PublicKeyCredential.toJSON()) over that "
        "challenge, made with user verification. Valid once, for those decisions only.",
    )

    _SECRETS = STEP_UP_SECRETS  # the adapter's (approvals.decide), which reads the proof

    def validate(self, attrs):
        if attrs["method"] in ("passkey", "provider") and not attrs.get("nonce"):
            raise serializers.ValidationError(
                {"nonce": f"The {attrs['method']} step-up needs `nonce`."}, code="required"
            )
        secret = self._SECRETS[attrs["method"]]
        if not attrs.get(secret):
            raise serializers.ValidationError(
                {secret: f"The {attrs['method']} step-up needs `{secret}`."}, code="required"
            )
        return attrs


class DecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(
        choices=["approve", "reject", "respond"],
        help_text="`respond`: on a suspension, the answer in `resume_data` (where more than one approver is "
        "needed, `approve` then agrees with the answer already proposed); on an action whose submission "
        "allows it, a reply in place of the tool with `message` (the tool never runs and the request ends "
        "rejected, like a rejection: no step-up, no quorum).",
    )
    feedback = serializers.CharField(max_length=10000, required=False, allow_blank=True, default="")
    message = serializers.CharField(
        max_length=10000,
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        help_text="With `respond` on an action: the reply the agent's model reads instead of the tool's result.",
    )
    resume_data = BoundedJSONObject(
        max_bytes_setting="API_MAX_PARAMS_BYTES",
        required=False,
        help_text="With `respond` on a suspension: the answer, validated against its resume schema "
        "(422 invalid_resume_data naming the failing path).",
    )
    edits = BoundedJSONObject(
        max_bytes_setting="API_MAX_PARAMS_BYTES",
        required=False,
        help_text="Approve with these params changed (only those the rule marks editable).",
    )
    revision = WholeNumberField(
        min_value=REVISION.low,
        max_value=REVISION.high,
        required=False,
        help_text="Required (here or as the `If-Match` header, the request's ETag): the revision you looked at. "
        "Without it nothing is recorded (422 revision_required); if the request moved on, nothing is "
        "recorded either (409 revision_changed).",
    )
    step_up = StepUpSerializer(
        required=False,
        help_text="Required to approve where the deciding level needs it (critical, or a rule that asks); "
        "without it the answer is 403 step_up_required.",
    )

    def validate(self, attrs):
        if attrs.get("edits") and attrs["decision"] != "approve":
            raise serializers.ValidationError({"edits": "Edits go with an approval."}, code="edits_with_reject")
        if "resume_data" in attrs and attrs["decision"] != "respond":
            raise serializers.ValidationError(
                {"resume_data": "resume_data goes with respond."}, code="resume_data_with_respond"
            )
        return attrs


class DecisionResultSerializer(ApprovalRequestSerializer):
    outcome = serializers.ChoiceField(
        choices=["approved", "rejected", "vote_recorded", "edit_proposed", "answer_proposed"],
        read_only=True,
        help_text="What this decision did: decided the request, counted toward its quorum, or left an edit "
        "as a proposal the deciding group must approve (your approval does not count for it); "
        "`answer_proposed` is the same for a suspension's answer.",
    )


class BatchItemSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    revision = WholeNumberField(
        min_value=REVISION.low,
        max_value=REVISION.high,
        required=False,
        help_text="Required: the revision you looked at (without it: 422 revision_required, nothing decided).",
    )


class BatchDecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    # many_init hands min_length and max_length to the ListSerializer; the stubs' __init__ lacks them.
    requests = BatchItemSerializer(many=True, min_length=1, max_length=100)  # type: ignore[call-arg]
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


class BatchResultSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    outcome = serializers.ChoiceField(choices=["approved", "rejected", "vote_recorded"], required=False)
    code = serializers.CharField(required=False, help_text="Why this one was refused (the single decision's codes).")
    message = serializers.CharField(required=False)


class BatchDecisionsSerializer(serializers.Serializer):
    digest = serializers.CharField(help_text="sha256 over the batch's request:revision:decision lines.")
    results = BatchResultSerializer(many=True)


class StepUpChallengeSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(
        choices=["approve", "approve_with_edits", "respond"], help_text="The verdict the passkey will confirm."
    )
    # many_init hands min_length and max_length to the ListSerializer; the stubs' __init__ lacks them.
    requests = BatchItemSerializer(  # type: ignore[call-arg]
        many=True,
        min_length=1,
        max_length=100,
        help_text="The requests (at the revisions you looked at) it will confirm it for.",
    )
    edits = BoundedJSONObject(
        max_bytes_setting="API_MAX_PARAMS_BYTES",
        required=False,
        help_text="With `approve_with_edits` (one request): exactly the `edits` the decision will send; the proof "
        "confirms those edits only.",
    )
    resume_data = BoundedJSONObject(
        max_bytes_setting="API_MAX_PARAMS_BYTES",
        required=False,
        help_text="With `respond` (one request): exactly the answer the decision will send; the proof confirms "
        "that answer only.",
    )

    def validate(self, attrs):
        carries = {"approve_with_edits": "edits", "respond": "resume_data"}.get(attrs["decision"])
        for name in ("edits", "resume_data"):
            if name in attrs and name != carries:
                raise serializers.ValidationError(
                    {name: f"{name} goes with {attrs['decision']!r} only."}, code="unexpected"
                )
        if carries and (carries not in attrs or len(attrs["requests"]) != 1):
            raise serializers.ValidationError(
                {carries: f"A {attrs['decision']} proof is for one request and names its `{carries}`."}, code="required"
            )
        return attrs


class StepUpChallengeResultSerializer(serializers.Serializer):
    method = serializers.ChoiceField(choices=["passkey", "provider"], help_text="How to prove it.")
    nonce = serializers.CharField(help_text="Send it back with the assertion, in `step_up.nonce`.")
    expires_in = serializers.IntegerField(help_text="Seconds the challenge stays valid; it is valid once.")
    publicKey = serializers.DictField(
        required=False,  # noqa: N815
        help_text="With `passkey`: options for navigator.credentials.get() (JSON encoding).",
    )
    redirect = serializers.CharField(
        required=False,
        help_text=(
            "With `provider`: open this address in the reviewer's browser (same session); it signs them in again at "
            "their identity provider (prompt=login, max_age=0) and proves the nonce; add `?next=` to come back."
        ),
    )


class RevealSerializer(serializers.Serializer):
    field = serializers.CharField(max_length=200, help_text="A top-level param name the request's rule masks.")


class RevealedSerializer(serializers.Serializer):
    field = serializers.CharField()
    value = serializers.JSONField(help_text="The param's value in the current revision, unmasked.")
    revision = serializers.IntegerField()
