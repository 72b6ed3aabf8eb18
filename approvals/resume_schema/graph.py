"""The submitted schema's graph, walked whole: every node reachable through the tree and through
every `$ref`, each checked once for its refs and its patterns (RE2 must compile them), and the
graph's expanded size and `$ref` depth bounded, so loops and fan-out are refused at submission.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jsonschema.exceptions import SchemaError

from ..errors import DomainError
from .engine import _FORMATS, _REGISTRY, _re2_error
from .limits import (
    INVALID_RESUME_SCHEMA,
    MAX_REF_DEPTH,
    MAX_SCHEMA_NODES,
    SCHEMA_PATTERN_REFUSED,
    SCHEMA_REF_REFUSED,
    _short,
)

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
