"""Which paths a rule's conditions can read, for the condition builder's suggestions
and its warnings about paths nothing provides.

A path nothing provides never resolves, so its condition silently never holds (only
``exists: false`` does): ``impact.recipents`` for ``impact.recipient_count`` is a
rule that protects nothing. Saving such a rule stays allowed (a warning, not a
refusal): an extractor may add impact keys this module cannot list, and an agent may
start sending a param tomorrow. What is known, by namespace:

``impact.*``
    The keys ``compute_impact`` always computes (``IMPACT_KEYS``). A registered
    extractor may add more; those are not listed, so they are warned about.
``params.*``
    For the action types the rule's glob matches: the params their server-side
    executor reads (``Executor.params``, through ``settings.EXECUTORS``), and every
    top-level param key seen in the last ``OBSERVED_SAMPLE`` requests of those types.
    When the glob matches no action type seen or executed here, nothing is known:
    the path is reported as unchecked (also a warning), not as wrong.
``target.*``
    What the server reads itself (``TARGET_KEYS``) plus every top-level target key
    seen on those requests.
``declared.*``
    Whatever the agent declares; never checked (and only readable by a rule that
    trusts declarations, which validation enforces).
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..rules.names import normalize_pattern
from ..rules.values import RuleValidationError, parse_path
from .dry_run import StoredRequest, recent_requests

__all__ = ["IMPACT_KEYS", "OBSERVED_SAMPLE", "TARGET_KEYS", "PathCatalogue", "catalogue_for", "path_warnings"]

# The keys compute_impact always sets (approvals/policy/rules/impact.py).
IMPACT_KEYS: Final = (
    "recipient_count",
    "amount",
    "target_count",
    "reversible",
    "sensitive",
    "sensitive_kinds",
    "unknown",
)
# Target keys the server itself reads: sensitivity labels, reversibility, ids, the webhook URL.
TARGET_KEYS: Final = ("labels", "reversible", "ids", "url")
OBSERVED_SAMPLE: Final = 1000
# Keys come from agents: only those a path can name are suggested, and at most this many
# per namespace, so an agent sending thousands of odd keys cannot bloat the editor.
MAX_SUGGESTED_KEYS: Final = 200
_PATH_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class PathCatalogue:
    """The paths known for one action-type glob. `action_types` are the known types it
    matches; with none, params.* cannot be checked (`params_known` False)."""

    pattern: str
    action_types: tuple[str, ...]
    params: tuple[str, ...]
    target: tuple[str, ...]
    params_known: bool = False

    @property
    def paths(self) -> list[str]:
        """Every suggestion, in the order the builder lists them (at most MAX_SUGGESTED_KEYS
        params and target keys each; warnings still check against all of them)."""
        return (
            [f"impact.{key}" for key in IMPACT_KEYS]
            + [f"params.{key}" for key in self.params[:MAX_SUGGESTED_KEYS]]
            + [f"target.{key}" for key in self.target[:MAX_SUGGESTED_KEYS]]
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "action_types": list(self.action_types),
            "paths": self.paths,
            "params_known": self.params_known,
        }


def _observed(requests: Iterable[StoredRequest]) -> dict[str, tuple[set[str], set[str]]]:
    seen: dict[str, tuple[set[str], set[str]]] = {}
    for stored in requests:
        params, target = seen.setdefault(stored.action_type, (set(), set()))
        params.update(key for key in stored.params if isinstance(key, str) and _PATH_KEY.match(key))
        target.update(key for key in stored.target if isinstance(key, str) and _PATH_KEY.match(key))
    return seen


def catalogue_for(
    pattern: Any, *, executor_params: Mapping[str, Sequence[str]], requests: Sequence[StoredRequest] | None = None
) -> PathCatalogue:
    """The paths known for the action types `pattern` (a rule's glob) matches.

    `executor_params` maps action-type globs to the params their executor reads
    (``approvals.execution.executors.params_by_action_type``); `requests` are the
    recent requests to learn from (default: the last ``OBSERVED_SAMPLE``, one query).
    A pattern that is not a valid glob matches nothing.
    """
    try:
        glob = normalize_pattern(pattern) if isinstance(pattern, str) and pattern else ""
    except RuleValidationError:
        glob = ""
    seen = _observed(recent_requests(OBSERVED_SAMPLE) if requests is None else requests)
    types: set[str] = set()
    params: set[str] = set()
    target: set[str] = set(TARGET_KEYS)
    if glob:
        for action_type, (seen_params, seen_target) in seen.items():
            if fnmatch.fnmatchcase(action_type, glob):
                types.add(action_type)
                params |= seen_params
                target |= seen_target
        for executed, declared in executor_params.items():
            # A literal executor mapping ("send_email") is an action type the glob may match;
            # a glob mapping ("demo_*") counts when the rule's glob is the same one.
            if declared and (fnmatch.fnmatchcase(executed, glob) or executed == glob):
                types.add(executed)
                params.update(declared)
    return PathCatalogue(
        pattern=glob,
        action_types=tuple(sorted(types)),
        params=tuple(sorted(params)),
        target=tuple(sorted(target)),
        params_known=bool(types),
    )


def _did_you_mean(key: str, known: Iterable[str], prefix: str) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f"; did you mean {prefix}.{close[0]}?" if close else ""


def path_warnings(conditions: Any, catalogue: PathCatalogue) -> list[dict[str, str]]:
    """``[{"field": "conditions[i].path", "message"}]`` for each condition whose path
    nothing known provides. Malformed conditions are skipped: validation names them."""
    if not isinstance(conditions, list):
        return []
    warnings = []
    for index, condition in enumerate(conditions):
        if not isinstance(condition, Mapping):
            continue
        try:
            segments = parse_path(condition.get("path"))
        except RuleValidationError:
            continue
        root, key = str(segments[0]), str(segments[1])
        message = ""
        if root == "impact" and key not in IMPACT_KEYS:
            message = (
                f"impact.{key} is not an impact fact the server computes, so this condition never holds"
                f"{_did_you_mean(key, IMPACT_KEYS, 'impact')}"
            )
        elif root == "params" and not catalogue.params_known:
            message = (
                f"no request matching {catalogue.pattern or 'this action type'!r} has been seen or is "
                f"executed here, so params.{key} cannot be checked; make sure the agent sends it"
            )
        elif root == "params" and key not in catalogue.params:
            message = (
                f"params.{key} is not a param of {', '.join(catalogue.action_types)} (seen in recent "
                f"requests or read by its executor), so this condition may never hold"
                f"{_did_you_mean(key, catalogue.params, 'params')}"
            )
        elif root == "target" and key not in catalogue.target:
            message = (
                f"target.{key} has not been seen on a recent request's target, so this condition may never "
                f"hold{_did_you_mean(key, catalogue.target, 'target')}"
            )
        if message:
            warnings.append({"field": f"conditions[{index}].path", "message": message})
    return warnings
