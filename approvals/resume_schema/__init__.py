"""A suspension's resume schema: checked once when the agent submits it, then used to
validate every answer a reviewer gives (DESIGN.md "Agent-facing contract", suspensions).

The schema comes from an agent, so it is treated as hostile input:

- draft 2020-12 (the default, and what zod 4's `toJSONSchema` writes) or draft-07
  (what Mastra's tool-approval chunk carries), chosen by `$schema`; other drafts are
  refused rather than guessed at;
- the top level describes an object (`type: "object"`): the answer is `resumeData`;
- `$ref`s are local (`#...`) only, and the registry refuses to retrieve anything, so
  no schema ever makes the server fetch a URL;
- bounded size and nesting; the whole schema graph is walked at submission
  (`_SchemaGraph`: every node reachable through the tree and through every `$ref`,
  wherever it points, even into `enum` data or an unknown keyword), each node's
  refs and patterns checked, and `$ref` loops, more than `MAX_SCHEMA_NODES` nodes
  with refs expanded (fan-out, "billion laughs" for schemas) and refs nested deeper
  than `MAX_REF_DEPTH` refused there; a budget of keyword evaluations per validation
  stays as the last guard;
- every regular expression (`pattern`, `patternProperties`, `format: "regex"`) is
  compiled and matched by RE2, which runs in linear time; a pattern RE2 cannot
  compile (backreferences, lookaround) is refused, never handed to Python's `re`,
  and a `pattern` that is not a string is refused too;
- answers have bounded cost: at most `API_MAX_PARAMS_BYTES` as JSON (the API's limit,
  on every path), arrays of at most `MAX_ANSWER_ITEMS`, and `uniqueItems` checked by
  hashing each item's canonical form into a set (jsonschema's own check is
  quadratic). Callers validate before taking the request's row lock.

jsonschema itself calls `re.search` for `pattern`, `patternProperties` and in
`additionalProperties`; those keywords are replaced here by RE2 versions, and
`unevaluatedProperties` (whose helper also calls `re`) is refused next to
`patternProperties`.

The package: `limits` (the codes and the bounds), `engine` (the RE2 validators, the
evaluation budget, one validation run), `graph` (the schema graph walk), `schema`
(`check_resume_schema`) and `answers` (`validate_resume_data`).
"""

from __future__ import annotations

from .answers import answer_size, max_answer_bytes, validate_resume_data
from .limits import (
    DRAFT_07,
    DRAFT_2020_12,
    INVALID_RESUME_DATA,
    INVALID_RESUME_SCHEMA,
    MAX_ANSWER_ITEMS,
    MAX_EVALUATIONS,
    MAX_REF_DEPTH,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_NODES,
    SCHEMA_CODES,
    SCHEMA_PATTERN_REFUSED,
    SCHEMA_REF_REFUSED,
    UNSUPPORTED_SCHEMA_DRAFT,
)
from .schema import check_resume_schema

__all__ = [
    "DRAFT_07",
    "DRAFT_2020_12",
    "INVALID_RESUME_DATA",
    "INVALID_RESUME_SCHEMA",
    "MAX_ANSWER_ITEMS",
    "MAX_EVALUATIONS",
    "MAX_REF_DEPTH",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "SCHEMA_CODES",
    "SCHEMA_PATTERN_REFUSED",
    "SCHEMA_REF_REFUSED",
    "UNSUPPORTED_SCHEMA_DRAFT",
    "answer_size",
    "check_resume_schema",
    "max_answer_bytes",
    "validate_resume_data",
]
