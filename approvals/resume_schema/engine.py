"""The validators answers are checked with: jsonschema's draft 2020-12 and draft-07 classes with
every keyword that calls Python's `re` replaced by an RE2 version, `uniqueItems` made linear,
and each keyword evaluation counted against `MAX_EVALUATIONS`; the registry refuses to fetch.

`_errors` runs one validation under that budget and says where the answer fails.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import re2
from jsonschema import Draft7Validator, Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.exceptions import NoSuchResource

from ..errors import DomainError
from .limits import DRAFT_07, DRAFT_2020_12, INVALID_RESUME_SCHEMA, MAX_EVALUATIONS, UNSUPPORTED_SCHEMA_DRAFT, _short


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
