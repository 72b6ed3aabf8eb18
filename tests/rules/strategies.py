"""Hypothesis strategies for rules tests: JSON documents, valid conditions, rule sets."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# Few keys, so random paths and random documents actually meet.
KEYS = ("a", "b", "to", "amount", "labels")
ROOTS = ("params", "target", "impact")

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["10", "100.50", "-3", "1e5", "NaN", "a@x"]),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.sampled_from(KEYS), children, max_size=4),
    max_leaves=12,
)
namespaces = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5)
documents = st.fixed_dictionaries(
    {"params": namespaces, "target": namespaces, "impact": namespaces, "declared": namespaces}
)

paths = st.builds(
    lambda root, rest: ".".join([root, *rest]),
    st.sampled_from(ROOTS),
    st.lists(st.sampled_from(KEYS) | st.sampled_from(["0", "1"]), min_size=1, max_size=3),
)
rule_scalars = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=6))
numbers = st.integers(-1000, 1000) | st.sampled_from(["100.50", "-0.5", "10"])
_values_by_op: dict[str, st.SearchStrategy[Any]] = {
    "eq": rule_scalars,
    "ne": rule_scalars,
    "gt": numbers,
    "gte": numbers,
    "lt": numbers,
    "lte": numbers,
    "in": st.lists(rule_scalars, min_size=1, max_size=4),
    "contains": rule_scalars,
    "matches": st.sampled_from(["^a", "x$", "[0-9]+", "@", "(?i)SECRET"]),
    "len_gt": st.integers(0, 5),
    "exists": st.booleans(),
}
conditions = st.sampled_from(sorted(_values_by_op)).flatmap(
    lambda op: st.builds(lambda path, value: {"path": path, "op": op, "value": value}, paths, _values_by_op[op])
)
