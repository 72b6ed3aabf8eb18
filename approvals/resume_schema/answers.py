"""Validating a reviewer's answer (`resumeData`) against the suspension's resume schema, at
bounded cost, before the request's row is locked.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from django.conf import settings

from controlplane.http.codes import VALIDATION_ERROR

from ..errors import DomainError
from .engine import _errors
from .limits import INVALID_RESUME_DATA, MAX_ANSWER_ITEMS


def _first_problem(answer: Any) -> tuple[str, str] | None:
    """(path, what) for the first infinite or NaN number, or array longer than
    `MAX_ANSWER_ITEMS`, in `answer`; one pass without recursion."""
    stack: list[tuple[str, Any]] = [("", answer)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path or "/", "the number is out of range"
        if isinstance(value, dict):
            stack.extend((f"{path}/{key}", item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            if len(value) > MAX_ANSWER_ITEMS:
                return path or "/", f"the list has {len(value)} items; at most {MAX_ANSWER_ITEMS}"
            stack.extend((f"{path}/{index}", item) for index, item in reversed(list(enumerate(value))))
    return None


def answer_size(answer: Any) -> int:
    """The answer's size in bytes as compact JSON: what `max_answer_bytes` bounds."""
    try:
        return len(json.dumps(answer, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode())
    except (TypeError, ValueError, RecursionError):
        return sys.maxsize


def max_answer_bytes() -> int:
    """The API's limit for `resume_data` (`API_MAX_PARAMS_BYTES`), for every path."""
    return settings.API_MAX_PARAMS_BYTES


def validate_resume_data(schema: dict[str, Any], answer: Any) -> None:
    """Refuse an answer the schema does not accept: 422 `invalid_resume_data`, the
    message naming the first failing JSON path (all of them in `details.errors`); an
    answer over `max_answer_bytes()` is 422 `validation_error` naming `resume_data`,
    as the API's serializer answers it. Bounded cost: the size, `MAX_ANSWER_ITEMS`, the
    evaluation budget and a linear `uniqueItems`. Callers run it before taking a
    request's row lock."""
    if not isinstance(answer, dict):
        raise DomainError(INVALID_RESUME_DATA, "resume_data must be a JSON object.", path="", field="resume_data")
    limit = max_answer_bytes()
    if answer_size(answer) > limit:  # the API's serializer answers the same, before this is reached
        raise DomainError(
            VALIDATION_ERROR,
            "The request is not valid; see details.",
            fields={"resume_data": [f"Must be at most {limit} bytes as JSON."]},
        )
    problem = _first_problem(answer)
    if problem is not None:  # 1e400 parses as infinity, which no JSON answer can carry back
        where, what = problem
        raise DomainError(INVALID_RESUME_DATA, f"resume_data{where}: {what}.", path=where, field="resume_data")
    found = _errors(schema, answer)
    if found:
        first = found[0]
        raise DomainError(
            INVALID_RESUME_DATA,
            f"resume_data{first.path or ''}: {first.message}",
            path=first.path,
            field="resume_data",
            errors=[{"path": error.path, "message": error.message} for error in found[:20]],
        )
