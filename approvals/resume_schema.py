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
"""

from __future__ import annotations

import contextvars
import functools
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import re2
from django.conf import settings
from jsonschema import Draft7Validator, Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import SchemaError, ValidationError
from referencing import Registry
from referencing.exceptions import NoSuchResource

from controlplane.http.codes import VALIDATION_ERROR, register

from .errors import DomainError

__all__ = [
    "INVALID_RESUME_DATA",
    "INVALID_RESUME_SCHEMA",
    "SCHEMA_CODES",
    "SCHEMA_PATTERN_REFUSED",
    "SCHEMA_REF_REFUSED",
    "UNSUPPORTED_SCHEMA_DRAFT",
    "answer_size",
    "check_resume_schema",
    "max_answer_bytes",
    "validate_resume_data",
]

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

# Keywords whose value is one subschema, a list of them, or a name -> subschema map.
_ONE = (
    "additionalProperties",
    "items",
    "additionalItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


class _OverBudget(Exception):
    """A validation spent more keyword evaluations than `MAX_EVALUATIONS`."""


_spent: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("resume_schema_spent", default=None)


def _counted(keyword_function):
    def counted(validator, value, instance, schema):
        spent = _spent.get()
        if spent is not None:
            spent[0] += 1
            if spent[0] > MAX_EVALUATIONS:
                raise _OverBudget
        return keyword_function(validator, value, instance, schema)

    return counted


# --- RE2 versions of the keywords jsonschema matches with `re` ---------------------------------


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the agent's error, answered as 422, not logged
    return options


_OPTIONS = _re2_options()


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str):
    return re2.compile(pattern, _OPTIONS)


def _re2_error(pattern: str) -> str | None:
    """Why RE2 cannot compile `pattern`, or None when it can."""
    try:
        _compiled(pattern)
    except re2.error as error:
        reason = error.args[0] if error.args else ""
        return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
    return None


def _pattern(validator, patrn, instance, schema):
    if validator.is_type(instance, "string") and not _compiled(patrn).search(instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        regex = _compiled(pattern)
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _extra_properties(instance, schema) -> Iterator[str]:
    properties = schema.get("properties", {})
    patterns = [_compiled(p) for p in schema.get("patternProperties", {})]
    for key in instance:
        if key not in properties and not any(regex.search(key) for regex in patterns):
            yield key


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    extras = list(_extra_properties(instance, schema))
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


def _regex_format(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    return _re2_error(instance) is None


# Only `regex` is asserted (by RE2); other formats stay annotations, as 2020-12 says.
_FORMATS = FormatChecker(formats=())
_FORMATS.checks("regex", raises=())(_regex_format)


def _canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal exactly where JSON Schema calls two values
    equal (jsonschema's `_utils.equal`): 1 and 1.0 alike, true and 1 not, objects by
    their members whatever the order."""
    if value is True or value is False:
        return ("b", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, (int, float)):
        return ("n", value)  # numerically equal int and float hash alike
    if isinstance(value, dict):
        return ("o", frozenset((key, _canonical(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return ("a", tuple(_canonical(item) for item in value))
    return ("z", None) if value is None else ("?", repr(value))


def _unique_items(validator, unique, instance, schema):
    # jsonschema's own check compares pairs (quadratic when items do not sort): 6,000
    # objects held a worker for 33 s. One canonical form per item, into a set: linear.
    if not unique or not validator.is_type(instance, "array"):
        return
    seen = set()
    for item in instance:
        key = _canonical(item)
        if key in seen:
            yield ValidationError(f"{_short(instance)} has non-unique elements")
            return
        seen.add(key)


def _linear(base):
    keywords = dict(base.VALIDATORS)
    keywords.update(
        pattern=_pattern,
        patternProperties=_pattern_properties,
        additionalProperties=_additional_properties,
        uniqueItems=_unique_items,
    )
    return validators.extend(base, {name: _counted(function) for name, function in keywords.items()})


_VALIDATORS = {DRAFT_2020_12: _linear(Draft202012Validator), DRAFT_07: _linear(Draft7Validator)}


def _refuse_retrieval(uri: str):
    raise NoSuchResource(ref=uri)


# Nothing is ever fetched: a `$ref` the schema does not contain is unresolvable.
_REGISTRY = Registry(retrieve=_refuse_retrieval)


# --- Checking a submitted schema --------------------------------------------------------------


def _draft(schema: dict[str, Any]) -> str:
    declared = schema.get("$schema")
    if declared is None:
        return DRAFT_2020_12
    if isinstance(declared, str) and declared.rstrip("#") in _VALIDATORS:
        return declared.rstrip("#")
    raise DomainError(
        UNSUPPORTED_SCHEMA_DRAFT,
        f"$schema {_short(declared)} is not supported: use {DRAFT_2020_12!r} or {DRAFT_07 + '#'!r}.",
        field="resume_schema",
    )


def _children(schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The direct subschemas of `schema` with their relative JSON pointers, not looking
    into data (`enum`, `const`, `default`, `examples`), so a value there is never read as
    a keyword (unless a `$ref` points there: `_SchemaGraph` follows those)."""
    for keyword in _ONE:
        if keyword in schema:
            yield f"/{keyword}", schema[keyword]
    for keyword in _LIST:
        if isinstance(schema.get(keyword), list):
            for index, item in enumerate(schema[keyword]):
                yield f"/{keyword}/{index}", item
    if isinstance(schema.get("items"), list):  # draft-07's tuple form
        for index, item in enumerate(schema["items"]):
            yield f"/items/{index}", item
    for keyword in _MAP:
        if isinstance(schema.get(keyword), dict):
            for name, item in schema[keyword].items():
                yield f"/{keyword}/{name}", item
    if isinstance(schema.get("dependencies"), dict):  # draft-07: a schema or a list of names
        for name, item in schema["dependencies"].items():
            yield f"/dependencies/{name}", item


def _subschemas(schema: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema of `schema` below it in the tree, with its JSON pointer."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for relative, child in _children(schema):
        yield from _subschemas(child, path + relative)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(item) for item in value), default=0)
    return 0


_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


class _SchemaGraph:
    """The whole schema graph: every subschema reachable from the top, through the tree
    and through every `$ref` (whatever keyword holds it, and wherever it points: a
    `$ref` may point into `enum` data or an unknown keyword, which the metaschema never
    looks at). Each node is checked once; then the graph's expanded size (each `$ref`
    counted as a copy of what it points to) and `$ref` depth are computed, memoized,
    so a loop or an exponential fan-out is refused at submission in linear time."""

    def __init__(self, schema: dict[str, Any], validator_class) -> None:
        self.validator_class = validator_class
        if not isinstance(schema.get("$id", ""), str):
            raise DomainError(INVALID_RESUME_SCHEMA, "$id at # is not a string.", field="resume_schema", path="#/$id")
        self.resolver = validator_class(schema, registry=_REGISTRY)._resolver
        self.paths: dict[int, str] = {}
        self.nodes: dict[int, dict[str, Any]] = {}
        self.edges: dict[int, list[tuple[bool, Any]]] = {}  # (through a $ref?, child)
        self.targets: list[tuple[str, dict[str, Any]]] = []
        self.root = schema
        self._walk(schema)

    def _walk(self, root: dict[str, Any]) -> None:
        stack: list[tuple[str, Any]] = [("#", root)]
        while stack:
            path, node = stack.pop()
            if not isinstance(node, dict) or id(node) in self.nodes:
                continue
            if len(self.nodes) >= MAX_SCHEMA_NODES:
                raise DomainError(
                    INVALID_RESUME_SCHEMA,
                    f"The resume schema has more than {MAX_SCHEMA_NODES} subschemas.",
                    field="resume_schema",
                )
            self.nodes[id(node)] = node
            self.paths[id(node)] = path
            edges = self.edges[id(node)] = []
            if node is not root and "$id" in node:
                raise DomainError(
                    INVALID_RESUME_SCHEMA,
                    f"$id at {path}: only the top of a resume schema may set $id.",
                    field="resume_schema",
                    path=f"{path}/$id",
                )
            _check_patterns(node, path)
            for relative, child in _children(node):
                edges.append((False, child))
                stack.append((path + relative, child))
            for keyword in _REF_KEYWORDS:
                if keyword in node:
                    target = self._target(node[keyword], keyword, path)
                    edges.append((True, target))
                    stack.append((node[keyword], target))

    def _target(self, ref: Any, keyword: str, path: str) -> Any:
        if not isinstance(ref, str):
            raise DomainError(
                INVALID_RESUME_SCHEMA,
                f"{keyword} at {path} is not a string.",
                field="resume_schema",
                path=f"{path}/{keyword}",
            )
        if not ref.startswith("#"):
            raise DomainError(
                SCHEMA_REF_REFUSED,
                f"{keyword} {_short(ref)} at {path} points outside the schema; only '#...' refs are allowed.",
                field="resume_schema",
                path=path,
            )
        try:
            target = self.resolver.lookup(ref).contents
        except Exception:  # noqa: BLE001 - referencing's Unresolvable and its kin
            raise DomainError(
                INVALID_RESUME_SCHEMA,
                f"The ref {_short(ref)} at {path} does not resolve.",
                field="resume_schema",
                path=path,
            ) from None
        if isinstance(target, bool):
            return target
        if not isinstance(target, dict):
            raise DomainError(
                INVALID_RESUME_SCHEMA,
                f"The ref {_short(ref)} at {path} points to something not a schema.",
                field="resume_schema",
                path=path,
            )
        self.targets.append((ref, target))
        return target

    def check_targets(self) -> None:
        """What a ref points to, outside the keywords the metaschema checks from the top,
        checked against the metaschema too (after the walk: patterns are named first)."""
        # The top's own metaschema check covers its tree; each target checked covers its own.
        # Outermost first, so no node is checked twice: linear in the schema.
        covered = {id(node) for _, node in _subschemas(self.root, "#")}
        for ref, target in sorted(self.targets, key=lambda item: len(self.paths[id(item[1])])):
            if id(target) in covered:
                continue
            covered.update(id(node) for _, node in _subschemas(target, ref))
            try:
                self.validator_class.check_schema(target, format_checker=_FORMATS)
            except SchemaError as error:
                where = ref + "".join(f"/{part}" for part in error.path)
                raise DomainError(
                    INVALID_RESUME_SCHEMA,
                    f"Not a valid JSON Schema at {where}: {error.message}",
                    field="resume_schema",
                    path=where,
                ) from None

    def refuse_loops_and_fan_out(self, root: dict[str, Any]) -> None:
        """Iterative post-order over the graph: a node met again while still open is a
        loop; sizes and ref depths are summed from the children, once per node."""
        size: dict[int, int] = {}
        depth: dict[int, int] = {}
        open_nodes: set[int] = set()
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            key = id(node)
            if done:
                open_nodes.discard(key)
                total, deepest = 1, 0
                for through_ref, child in self.edges[key]:
                    if isinstance(child, dict):
                        total += size[id(child)]
                        deepest = max(deepest, depth[id(child)] + through_ref)
                size[key], depth[key] = total, deepest
                where = self.paths[key]
                if total > MAX_SCHEMA_NODES:
                    raise DomainError(
                        INVALID_RESUME_SCHEMA,
                        f"The resume schema's refs expand to more than {MAX_SCHEMA_NODES} subschemas (at {where}).",
                        field="resume_schema",
                        path=where,
                    )
                if deepest > MAX_REF_DEPTH:
                    raise DomainError(
                        INVALID_RESUME_SCHEMA,
                        f"The resume schema's refs nest more than {MAX_REF_DEPTH} deep (at {where}).",
                        field="resume_schema",
                        path=where,
                    )
                continue
            if key in size:
                continue
            if key in open_nodes:
                raise DomainError(
                    INVALID_RESUME_SCHEMA,
                    f"The resume schema refers to itself in a loop (through {self.paths[key]}).",
                    field="resume_schema",
                    path=self.paths[key],
                )
            open_nodes.add(key)
            stack.append((node, True))
            for _, child in self.edges[key]:
                if isinstance(child, dict):
                    stack.append((child, False))


def _check_patterns(node: dict[str, Any], path: str) -> None:
    patterns = []
    if "pattern" in node:
        if not isinstance(node["pattern"], str):
            raise DomainError(
                INVALID_RESUME_SCHEMA,
                f"pattern at {path} is not a string.",
                field="resume_schema",
                path=f"{path}/pattern",
            )
        patterns.append((f"{path}/pattern", node["pattern"]))
    if "patternProperties" in node:
        if not isinstance(node["patternProperties"], dict):
            raise DomainError(
                INVALID_RESUME_SCHEMA,
                f"patternProperties at {path} is not an object.",
                field="resume_schema",
                path=f"{path}/patternProperties",
            )
        patterns += [(f"{path}/patternProperties", key) for key in node["patternProperties"]]
    for where, pattern in patterns:
        reason = _re2_error(pattern)
        if reason is not None:
            raise DomainError(
                SCHEMA_PATTERN_REFUSED,
                f"The pattern {_short(pattern)} at {where} is not supported by RE2 ({reason}); "
                "rewrite it without backreferences or lookaround.",
                field="resume_schema",
                path=where,
            )


def _refuse_unsafe_parts(schema: dict[str, Any], validator_class) -> None:
    graph = _SchemaGraph(schema, validator_class)
    graph.refuse_loops_and_fan_out(schema)
    graph.check_targets()
    nodes = graph.nodes.values()
    if any("patternProperties" in node for node in nodes) and any("unevaluatedProperties" in node for node in nodes):
        raise DomainError(
            INVALID_RESUME_SCHEMA,
            "unevaluatedProperties cannot be combined with patternProperties here.",
            field="resume_schema",
        )


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


# --- Validating an answer ----------------------------------------------------------------------


@dataclass(frozen=True)
class AnswerError:
    path: str  # a JSON pointer into the answer ("" is the answer itself)
    message: str


def _errors(schema: dict[str, Any], answer: Any) -> list[AnswerError]:
    validator = _VALIDATORS[_draft(schema)](schema, registry=_REGISTRY, format_checker=_FORMATS)
    token = _spent.set([0])
    try:
        found = sorted(validator.iter_errors(answer), key=lambda error: list(error.absolute_path))
    except _OverBudget:
        raise DomainError(
            INVALID_RESUME_SCHEMA,
            "The resume schema is too complex to validate an answer against.",
            field="resume_schema",
        ) from None
    except RecursionError:
        raise DomainError(
            INVALID_RESUME_SCHEMA, "The resume schema refers to itself without end.", field="resume_schema"
        ) from None
    except Exception as error:  # noqa: BLE001 - jsonschema raises referencing's errors for a bad `$ref`
        if type(error).__module__.startswith(("referencing", "jsonschema")):
            raise DomainError(
                INVALID_RESUME_SCHEMA,
                f"A $ref in the resume schema does not resolve: {str(error)[:200]}",
                field="resume_schema",
            ) from None
        raise
    finally:
        _spent.reset(token)
    return [AnswerError(_pointer(error), _message(error)) for error in found]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _message(error: ValidationError) -> str:
    """jsonschema's message, with the offending value shortened: it may be 64 KB long."""
    text = error.message
    if len(text) > 300:
        text = text.replace(repr(error.instance), _short(error.instance))
    return text[:300]


def _pointer(error: ValidationError) -> str:
    """Where the answer fails, as a JSON pointer; a missing required property is named
    by the path it should have been at."""
    path = "".join(f"/{part}" for part in error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [name for name in error.validator_value if name not in error.instance and repr(name) in error.message]
        if missing:
            path += f"/{missing[0]}"
    return path


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
