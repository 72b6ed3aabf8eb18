"""A simple resume schema and answers for it, mostly plausible, often not (shared by
the server's property tests and the browser's agreement test)."""

from __future__ import annotations

from hypothesis import strategies as st

from approvals.errors import DomainError
from approvals.resume_schema import INVALID_RESUME_DATA, validate_resume_data

__all__ = ["SIMPLE", "SIMPLE_07", "answers", "server_accepts"]

SIMPLE = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "amount": {"type": "number", "minimum": 0, "exclusiveMaximum": 1_000_000},
        "count": {"type": "integer", "multipleOf": 2},
        "channel": {"enum": ["email", "sms", None]},
        "code": {"type": "string", "pattern": "^[a-z]{2,4}-[0-9]+$", "maxLength": 12},
        "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 3, "uniqueItems": True},
        "contact": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    },
    "required": ["approved"],
    "patternProperties": {"^x-[a-z]+$": {"type": "string"}},
    "additionalProperties": False,
}
SIMPLE_07 = {**SIMPLE, "$schema": "http://json-schema.org/draft-07/schema#"}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-10, 10**7)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["ab-12", "abcd-0", "email", "sms", "x", "", "AB-1"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "approved",
                    "amount",
                    "count",
                    "channel",
                    "code",
                    "tags",
                    "contact",
                    "name",
                    "x-note",
                    "x-Bad",
                    "other",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=12,
)
# Answers a reviewer could mean (mostly valid), then the same with any field replaced by anything.
plausible = st.fixed_dictionaries(
    {"approved": st.booleans()},
    optional={
        "amount": st.floats(0, 999_999) | st.integers(0, 10**5),
        "count": st.integers(-4, 10).map(lambda n: n * 2),
        "channel": st.sampled_from(["email", "sms", None]),
        "code": st.from_regex(r"^[a-z]{2,4}-[0-9]{1,3}$", fullmatch=True),
        "tags": st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True),
        "contact": st.fixed_dictionaries({"name": st.text(max_size=5)}),
        "x-note": st.text(max_size=5),
    },
)
anything = st.fixed_dictionaries(
    {},
    optional={
        "approved": st.booleans() | json_values,
        "amount": st.floats(-5, 2_000_000) | json_values,
        "count": st.integers(-4, 10) | json_values,
        "channel": st.sampled_from(["email", "sms", None, "fax"]),
        "code": st.from_regex(r"^[a-z]{2,4}-[0-9]{1,3}$", fullmatch=True) | json_values,
        "tags": st.lists(st.sampled_from(["a", "b", "", "c"]), max_size=4) | json_values,
        "contact": st.fixed_dictionaries({"name": st.text(max_size=5)}) | json_values,
        "x-note": json_values,
        "x-Bad": json_values,
        "other": json_values,
    },
)
answers = plausible | anything | st.tuples(plausible, anything).map(lambda pair: {**pair[0], **pair[1]})


def server_accepts(schema: dict, answer: dict) -> bool:
    try:
        validate_resume_data(schema, answer)
    except DomainError as refused:
        assert refused.code == INVALID_RESUME_DATA
        assert refused.details["path"] == "" or refused.details["path"].startswith("/")
        return False
    return True
