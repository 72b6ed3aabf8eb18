"""Masked params: the one way a request's params leave the server.

A rule marks params masked (an email body, say). Which params are masked on a
request is decided by the rule that classified it and stored with the request
(`request.classification["masked_params"]`), never by whatever rule someone is
probing with: `masked_paths(request)` is that set, and every surface that shows a
request's params (cards and pages, the sync JSON, the API, sockets, notifications,
the rule tester, dry-runs, errors) takes them through `shown_params(request)`,
which replaces each masked value with `MASK`.

Nobody reads a masked value through these functions, reviewers who may decide
included: the only way out for a value is `approvals.services.reveal` (a reviewer
who may decide, while the request is pending, each read audited). Agents are not
people: the API gives an agent its own call as it sent it (it already has it).

Anything derived from a masked value goes the same way: `shown_impact` masks the
impact facts that copy a param's value (the amount, and whatever a registered
extractor adds, since nothing says which params those read); counts and yes/no
facts (recipients, targets, reversible, sensitive) are computed by fixed server
code from the whole call, are what reviewers decide on, and stay. `blinded` is
what rule evaluation for a viewer (the tester, dry-runs) reads instead of the real
params, so an admin-written condition cannot act as an oracle for a masked value.

Pure Python (no Django): the rules engine imports `MASK`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Mapping
from typing import Any

__all__ = [
    "COARSE_IMPACT_FACTS",
    "MASK",
    "blinded",
    "masked",
    "masked_facts",
    "masked_impact",
    "masked_paths",
    "reads_masked",
    "shown_impact",
    "shown_params",
]

MASK = "••••••"

# Impact facts that are counts or yes/no answers, never a param's value: shown as computed.
COARSE_IMPACT_FACTS = frozenset(
    {
        "recipient_count",
        "target_count",
        "reversible",
        "sensitive",
        "sensitive_kinds",
        "unknown",
    }
)


def masked(params: Mapping[str, Any], keys: Collection[str]) -> dict[str, Any]:
    """`params` with the values of `keys` replaced by the mask."""
    return {key: (MASK if key in keys else value) for key, value in params.items()}


def masked_paths(request: Any) -> frozenset[str]:
    """The top-level param names masked on `request`: its classification's (the rule
    that classified it, as stored), whatever rule anyone tests it with."""
    classification = getattr(request, "classification", None) or {}
    names = classification.get("masked_params") or ()
    return frozenset(name for name in names if isinstance(name, str))


def _current_params(request: Any) -> dict[str, Any]:
    # The API's list annotates the current revision's params on each row (no query).
    from_query = getattr(request, "current_params_value", None)
    if isinstance(from_query, dict):
        return from_query
    params = request.current_params()
    return params if isinstance(params, dict) else {}


def shown_params(request: Any, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """THE choke point: `params` (default: the request's current revision) as anyone
    may see them, with the request's masked params masked."""
    if params is None:
        params = _current_params(request)
    return masked(params, masked_paths(request))


def masked_impact(
    impact: Mapping[str, Any], paths: Collection[str], params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """`impact` with the facts that may copy a masked param's value masked: `amount`
    when a masked param (`paths`, of `params`) may be where it was read (a key naming
    an amount, or a nested value; without `params`, whenever anything is masked), and
    any fact a registered extractor adds whenever anything is masked (nothing says
    which params it reads). `COARSE_IMPACT_FACTS` stay as computed."""
    if not paths:
        return dict(impact)
    amount_masked = params is None or any(_may_hold_amount(key, params.get(key)) for key in paths if key in params)
    shown = {}
    for key, value in impact.items():
        copies = key not in COARSE_IMPACT_FACTS and (key != "amount" or amount_masked)
        shown[key] = MASK if copies and value is not None else value
    return shown


def masked_facts(
    impact: Mapping[str, Any], paths: Collection[str], params: Mapping[str, Any] | None = None
) -> frozenset[str]:
    """The impact facts `masked_impact` masks."""
    shown = masked_impact(impact, paths, params)
    return frozenset(key for key, value in impact.items() if shown[key] is MASK and value is not MASK)


def _may_hold_amount(key: str, value: Any) -> bool:
    # Wider than fact extraction's own test (`facts.normalize_key(key) == "amount"`),
    # so a fact it reads from a masked param is always masked.
    return "amount" in unicodedata.normalize("NFKC", key).casefold() or isinstance(value, (Mapping, list, tuple))


def shown_impact(
    request: Any, impact: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """`impact` (default: the request's) as anyone may see it (`masked_impact`);
    `params`: the current revision's, when the caller has them."""
    if impact is None:
        impact = getattr(request, "impact", None) or {}
    paths = masked_paths(request)
    if paths and params is None:
        params = _current_params(request)
    return masked_impact(impact, paths, params)


def blinded(params: Mapping[str, Any], paths: Collection[str]) -> dict[str, Any]:
    """What a rule evaluated on a viewer's behalf reads: each masked value replaced by
    the mask, so the outcome (held, matched, level, explanation) cannot depend on it.
    Blind the impact with `masked_impact`, computed from the real params first."""
    return masked(params, paths)


def reads_masked(conditions: Any, paths: Collection[str], facts: Collection[str] | None = None) -> list[str]:
    """The paths of `conditions` (compiled conditions: `path`, `op`, `param_name`,
    `impact_key`) that read a masked value: a masked param (`paths`), or an impact
    fact among `facts` (`masked_facts`; None: any fact but the coarse ones). `exists`
    is left out: that a masked param is set shows on every card already."""
    if not paths:
        return []
    found = []
    for condition in conditions:
        if condition.op == "exists":
            continue
        key = getattr(condition, "impact_key", None)
        fact = key is not None and (key not in COARSE_IMPACT_FACTS if facts is None else key in facts)
        if condition.param_name in paths or fact:
            found.append(condition.path)
    return list(dict.fromkeys(found))
