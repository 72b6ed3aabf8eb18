"""Checking a submitted resume schema: `check_resume_schema`, run once when the agent submits."""

from __future__ import annotations

import json
from typing import Any

from jsonschema.exceptions import SchemaError

from ..errors import DomainError
from .engine import _FORMATS, _VALIDATORS, _draft, _errors
from .graph import _depth, _refuse_unsafe_parts
from .limits import INVALID_RESUME_SCHEMA, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH


def check_resume_schema(schema: Any) -> None:
    """Refuse a resume schema the server will not validate answers against.

    Raises DomainError: `invalid_resume_schema`, `unsupported_schema_draft`,
    `schema_ref_refused` or `schema_pattern_refused` (all 422).
    """
    if not isinstance(schema, dict):
        raise DomainError(INVALID_RESUME_SCHEMA, "The resume schema must be a JSON object.", field="resume_schema")
    size = len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_SCHEMA_BYTES:
        raise DomainError(
            INVALID_RESUME_SCHEMA,
            f"The resume schema is {size} bytes; at most {MAX_SCHEMA_BYTES}.",
            field="resume_schema",
        )
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise DomainError(
            INVALID_RESUME_SCHEMA,
            f"The resume schema nests deeper than {MAX_SCHEMA_DEPTH} levels.",
            field="resume_schema",
        )
    validator_class = _VALIDATORS[_draft(schema)]
    # The whole graph, before the metaschema check of the top: refs, patterns, loops, fan-out.
    _refuse_unsafe_parts(schema, validator_class)
    try:
        # `format: regex` in the metaschema is RE2's too: RE2 syntax (\p{Greek}) is not Python's.
        validator_class.check_schema(schema, format_checker=_FORMATS)
    except SchemaError as error:
        where = "#" + "".join(f"/{part}" for part in error.path)
        raise DomainError(
            INVALID_RESUME_SCHEMA,
            f"Not a valid JSON Schema at {where}: {error.message}",
            field="resume_schema",
            path=where,
        ) from None
    if schema.get("type") != "object":
        raise DomainError(
            INVALID_RESUME_SCHEMA,
            'The resume schema must describe an object ("type": "object").',
            field="resume_schema",
        )
    # A trial run, the last guard: anything the graph walk missed spends the same budget.
    _errors(schema, {})
