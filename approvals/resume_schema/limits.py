"""What a resume schema and an answer are refused with, and the bounds they are held to.

The codes are registered here (the OpenAPI schema lists `SCHEMA_CODES`); the drafts the
server validates with, and the limits on a schema's size, nesting, graph and evaluation
budget and on an answer's arrays, are the numbers the rest of the package checks.
"""

from __future__ import annotations

from typing import Any

from controlplane.http.codes import register

INVALID_RESUME_SCHEMA = register(
    "invalid_resume_schema",
    422,
    "The resume schema is not a JSON Schema for an object, or is too large, too deep or too complex.",
)
UNSUPPORTED_SCHEMA_DRAFT = register(
    "unsupported_schema_draft", 422, "Resume schemas are JSON Schema draft 2020-12 or draft-07 (`$schema`)."
)
SCHEMA_REF_REFUSED = register(
    "schema_ref_refused", 422, "Resume schemas may only `$ref` within themselves (`#...`); nothing is fetched."
)
SCHEMA_PATTERN_REFUSED = register(
    "schema_pattern_refused",
    422,
    "A regular expression in the resume schema is not supported by the linear-time engine (RE2).",
)
INVALID_RESUME_DATA = register(
    "invalid_resume_data", 422, "The answer does not satisfy the suspension's resume schema; `details.path` says where."
)


# What a submission can be refused with (the OpenAPI schema lists them).
SCHEMA_CODES = (INVALID_RESUME_SCHEMA, UNSUPPORTED_SCHEMA_DRAFT, SCHEMA_REF_REFUSED, SCHEMA_PATTERN_REFUSED)


DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DRAFT_07 = "http://json-schema.org/draft-07/schema"
MAX_SCHEMA_BYTES = 32 * 1024
MAX_SCHEMA_DEPTH = 32
# Keyword evaluations one validation may spend. An answer a person types needs a few
# hundred; the budget stops a schema whose `$ref`s fan out exponentially (30 levels of
# two-way `anyOf` would be a billion) after about a second of one worker's time.
MAX_EVALUATIONS = 20_000
# The schema graph, walked whole at submission: schema nodes counted with every `$ref`
# expanded where it stands (so 30 levels of two-way fan-out count 2^31, refused), and
# how many `$ref`s one path through the schema may follow.
MAX_SCHEMA_NODES = 2_000
MAX_REF_DEPTH = 16
# An answer: at most `API_MAX_PARAMS_BYTES` as JSON (the API's limit for resume_data,
# enforced here for every path: page form, API, batch) and arrays of at most this length.
MAX_ANSWER_ITEMS = 10_000


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
