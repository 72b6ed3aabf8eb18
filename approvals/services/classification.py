"""Classifying a request's params under the current policy, and writing the outcome.

The model never decides its own risk: impact is computed on the server and the
engine reads what the agent vouches for the strict way (`approvals.policy.rules`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group
from django.db import connection

from ..masking import masked_paths
from ..models import ApprovalRequest, RiskRule
from ..policy import ActivePolicy, current_policy
from ..policy.rules.engine import Classification, ClassificationInput
from ..policy.rules.impact import compute_impact
from ..policy.rules.levels import level_rank
from ..states import RiskLevel

__all__ = [
    "Classified",
    "apply_classification",
    "classification_input",
    "classify_params",
    "scrutiny",
    "stricter_than_request",
]


@dataclass(frozen=True)
class Classified:
    """One classification of a request's params, with what it was computed from."""

    classification: Classification
    policy_version_id: int | None
    impact: dict[str, Any]


def classification_input(
    request: ApprovalRequest, params: dict[str, Any], *, policy: ActivePolicy | None = None
) -> ClassificationInput:
    """What the rules read about `params` as a call of `request` under `policy`
    (default: the current one)."""
    policy = policy or current_policy()
    # The name as the agent spelled it: its camelCase word boundaries find destructive verbs.
    action_type = request.action_type_sent or request.action_type
    return ClassificationInput(
        action_type=action_type,
        params=params,
        target=request.target,
        impact=compute_impact(action_type, params, request.target, destructive_verbs=policy.compiled.destructive_verbs),
        declared=request.declared,
        # A re-classification (an edit, re-validation) explains itself with the
        # request's masked params still masked, whichever rule decides now.
        masked=masked_paths(request),
    )


def classify_params(request: ApprovalRequest, params: dict[str, Any]) -> Classified:
    """Classify `params` as a call of `request` under the current policy."""
    active = current_policy()
    inp = classification_input(request, params, policy=active)
    return Classified(active.compiled.classify(inp), active.version_id, dict(inp.impact))


def scrutiny(risk_level: str, required_approvals: int) -> tuple[int, int]:
    """How much a classification demands: level first, then the number of approvers."""
    return level_rank(risk_level), max(1, required_approvals)


def stricter_than_request(request: ApprovalRequest, fresh: Classification) -> bool:
    """Would `fresh` demand more than the request was classified (or approved) under?"""
    return level_rank(fresh.risk_level) > level_rank(request.risk_level) or (
        fresh.risk_level != RiskLevel.LOW and fresh.required_approvals > request.required_approvals
    )


def apply_classification(request: ApprovalRequest, classified: Classified) -> None:
    """Copy a classification onto the request (not saved: the caller saves or inserts)."""
    classification = classified.classification
    # Masking never shrinks on a request: a param its earlier rule masked stays masked
    # when an edit or escalation hands it to a rule that masks less (reviewers there
    # would otherwise read what the first group was shown only masked).
    masked_before = masked_paths(request)
    request.risk_level = classification.risk_level
    request.rule_name = classification.rule_name or ""
    request.classification = classification.to_dict()
    if masked_before - set(classification.masked_params):
        request.classification["masked_params"] = [
            *classification.masked_params,
            *sorted(masked_before - set(classification.masked_params)),
        ]
    request.policy_version_id = classified.policy_version_id
    request.required_approvals = max(1, classification.required_approvals)
    request.impact = classified.impact
    rule_id, group_id = _rule_and_group_ids(classification.rule_name, classification.approver_group)
    request.rule_id = rule_id
    # The group row was found by this name, so id and name are all there is to load.
    request.approver_group = None if group_id is None else Group(pk=group_id, name=classification.approver_group)


def _rule_and_group_ids(rule_name: str | None, group_name: str | None) -> tuple[int | None, int | None]:
    """The classifying rule's id and the approver group's id, looked up by name in one
    round trip (both run on every submission). None for a name that has no row.

    Written out because it pays: ~0.12 ms of CPU against ~0.9 ms for the two ORM
    lookups, on every submission (tests/perf/bench_submit.py, in-process figure)."""
    if not rule_name and not group_name:
        return None, None
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT {quote('id')} FROM {quote(RiskRule._meta.db_table)} WHERE {quote('name')} = %s LIMIT 1),"
            f" (SELECT {quote('id')} FROM {quote(Group._meta.db_table)} WHERE {quote('name')} = %s LIMIT 1)",
            [rule_name or "", group_name or ""],
        )
        rule_id, group_id = cursor.fetchone()
    return (rule_id if rule_name else None), (group_id if group_name else None)
