"""Patterns run in linear time (DESIGN.md), issue 22 item 3 and the hostile-schema list.

Nothing here measures time: each test asserts which engine ran, what was refused and
with which field, or counts operations. A backtracking engine would not fail these
tests slowly; it is shown not to be called at all.
"""

from __future__ import annotations

import json
import re
import threading

import pytest
import re2
from django.db import OperationalError, connection
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals import policy, resume_schema
from approvals.errors import DomainError
from approvals.models import ApprovalRequest, PolicyVersion, RiskRule
from approvals.people import Person
from approvals.policy.rules import conditions, patterns
from approvals.policy.rules.engine import ClassificationInput, CompiledPolicy, PolicyDefaults, RuleSpec
from approvals.policy.rules.levels import level_rank
from approvals.policy.rules.seed import SEED_RULES
from approvals.resume_schema import answers as schema_answers
from approvals.resume_schema import engine as schema_engine
from approvals.resume_schema import graph as schema_graph
from approvals.services import respond_to_suspension

# The suspension tests' API clients and settings, as fixtures here too.
from ..suspensions.conftest import (
    APPROVAL_STEP,
    agent_api_settings,
    api,
    decide,
    fresh_counters,
    pending,
    reviewer_client,
    suspend,
)

__all__ = ["agent_api_settings", "api", "fresh_counters", "pending", "reviewer_client", "suspend"]

CATASTROPHIC = "^(a+)+$"


def _rule(pattern: str, *, level: str = "prohibited", name: str = "no_aaa", path: str = "params.code") -> dict:
    return {
        "name": name,
        "priority": 1,
        "action_type": "run_job",
        "risk_level": level,
        "conditions": [{"path": path, "op": "matches", "value": pattern}],
    }


def _classify(policy_rules: list[dict], params: dict, action_type: str = "run_job"):
    compiled = CompiledPolicy(1, [RuleSpec.from_dict(rule) for rule in policy_rules], PolicyDefaults())
    return compiled.classify(ClassificationInput.build(action_type=action_type, params=params))


class _NoBacktracking:
    """Stands in for the `re` module inside the rule conditions: any call fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"Python's re.{name} was called for a pattern RE2 runs")


# --- Rules: RE2 runs every `matches` ---------------------------------------------------------------


class TestRulePatternsRunOnRE2:
    def test_a_catastrophic_pattern_is_compiled_once_by_re2_and_evaluated_on_10k_characters(self, monkeypatch):
        monkeypatch.setattr(conditions, "re", _NoBacktracking())
        spec = RuleSpec.from_dict(_rule(CATASTROPHIC))
        operand = spec.compiled_conditions[0]._operand
        assert operand.engine == "re2" and isinstance(operand._regex, re2._Regexp)
        compiled = CompiledPolicy(1, [spec], PolicyDefaults())
        hostile = ClassificationInput.build(action_type="run_job", params={"code": "a" * 10_000 + "!"})
        assert compiled.classify(hostile).risk_level != "prohibited"  # RE2 says: no match
        assert (
            compiled.classify(
                ClassificationInput.build(action_type="run_job", params={"code": "a" * 10_000})
            ).risk_level
            == "prohibited"
        )
        # One compiled pattern per text, shared: evaluation never compiles again.
        assert patterns.compile_pattern(CATASTROPHIC) is operand

    @pytest.mark.parametrize(
        "pattern", [r"(a)\1", r"(?=x)y", r"(?<!x)y", r"a*+", r"(?>a)", r"\Z", r"a{,3}", r"[[:alpha:]]"]
    )
    def test_a_pattern_re2_cannot_run_as_written_is_refused_at_save_naming_the_field(self, admin_user, pattern):
        with pytest.raises(conditions.RuleValidationError) as refused:
            policy.save_rule(_rule(pattern), actor=Person(admin_user), note="try a lookaround")
        assert refused.value.field == "conditions[0].value"
        assert not RiskRule.objects.filter(name="no_aaa").exists()

    def test_the_json_rules_endpoint_refuses_a_backreference_naming_the_field(self, client, admin_user):
        client.force_login(admin_user)
        response = client.post(
            reverse("rules:validate"),
            data=json.dumps({"rule": _rule(r"(a)\1")}),
            content_type="application/json",
            HTTP_ACCEPT="application/json",
        )
        body = response.json()
        assert (response.status_code, body["code"]) == (422, "invalid_rule")
        assert body["details"]["field"] == "conditions[0].value"

    def test_the_rule_editor_form_refuses_a_lookaround_naming_the_field(self, client, admin_user):
        client.force_login(admin_user)
        response = client.post(reverse("rules:new"), {"rule_json": json.dumps(_rule(r"(?=x)y")), "note": "lookahead"})
        assert response.status_code == 422
        assert "conditions[0].value" in response.content.decode()
        assert not RiskRule.objects.filter(name="no_aaa").exists()

    def test_the_rule_tester_runs_a_catastrophic_pattern_on_re2(self, client, admin_user, monkeypatch):
        client.force_login(admin_user)
        monkeypatch.setattr(conditions, "re", _NoBacktracking())
        sample = {"action_type": "run_job", "params": {"code": "a" * 40 + "!"}}  # 2^40 steps for `re`
        response = client.post(
            reverse("rules:test"),
            data=json.dumps({"rule": _rule(CATASTROPHIC), "sample": sample}),
            content_type="application/json",
            HTTP_ACCEPT="application/json",
        )
        assert response.status_code == 200, response.content
        assert response.json()["conditions"][0]["held"] is False
        assert response.json()["rule_matches"] is False


# --- Rules stored before the switch ---------------------------------------------------------------


def _store_as_before_the_switch(name: str, pattern: str) -> None:
    """Write `pattern` into the stored rule as Python's re accepted it, bypassing today's checks."""
    newest = PolicyVersion.objects.order_by("-number").first()
    rules = [dict(rule) for rule in newest.rules]
    for rule in rules:
        if rule["name"] == name:
            rule["conditions"] = [{**rule["conditions"][0], "value": pattern}]
    PolicyVersion.objects.filter(pk=newest.pk).update(rules=rules)
    stored = RiskRule.objects.get(name=name)
    stored.conditions = [{**stored.conditions[0], "value": pattern}]
    stored.save(update_fields=["conditions"])


class TestStoredPatternsRE2CannotRun:
    @pytest.fixture
    def legacy(self, admin_user):
        """A prohibited rule saved as `y` (no x before it), then stored as re wrote it: `(?<!x)y`."""
        policy.save_rule(_rule("y", path="params.code"), actor=Person(admin_user), note="no y")
        _store_as_before_the_switch("no_aaa", r"(?<!x)y")
        return "no_aaa"

    def test_loading_the_policy_logs_it(self, legacy, caplog):
        from approvals.policy import current

        current._compiled_by_key.clear()
        with caplog.at_level("WARNING", logger="approvals.policy.current"):
            policy.current_policy()
        assert "rule no_aaa, conditions[0].value" in caplog.text and "could-match" in caplog.text

    @pytest.mark.parametrize("code", ["zy", "xy", "nothing"])
    def test_it_reads_as_could_match_on_every_input(self, legacy, code):
        decided = policy.current_policy().compiled.classify(
            ClassificationInput.build(action_type="run_job", params={"code": code})
        )
        assert decided.risk_level == "prohibited"  # the strict reading, never a silent "no match"
        assert "params.code" in decided.unknown_paths

    def test_the_rules_page_flags_it(self, legacy, client, admin_user):
        client.force_login(admin_user)
        page = client.get(reverse("rules:list")).content.decode()
        assert 'id="pattern-problems"' in page and "pattern needs rewriting (conditions[0].value)" in page
        editor = client.get(reverse("rules:edit", args=[legacy]))
        assert editor.status_code == 200 and "conditions[0].value" in editor.content.decode()

    def test_other_changes_still_save_and_it_stays_until_rewritten(self, legacy, admin_user):
        actor = Person(admin_user)
        policy.save_rule(_rule("^ok$", name="other", level="high"), actor=actor, note="an unrelated rule")
        assert (
            policy.current_policy()
            .compiled.classify(ClassificationInput.build(action_type="run_job", params={"code": "xy"}))
            .risk_level
            == "prohibited"
        )
        with pytest.raises(conditions.RuleValidationError) as refused:  # saving it as is: refused, named
            policy.save_rule(_rule(r"(?<!x)y"), actor=actor, note="keep")
        assert refused.value.field == "conditions[0].value"
        policy.save_rule(_rule(r"(^|[^x])y"), actor=actor, note="rewritten for RE2")
        assert (
            policy.current_policy()
            .compiled.classify(ClassificationInput.build(action_type="run_job", params={"code": "xy"}))
            .risk_level
            != "prohibited"
        )


# --- The same classification before and after the switch -----------------------------------------

ORDINARY = [
    r"^URGENT",
    r"^[0-9]{16}$",
    r"@example\.com$",
    r"(?i)secret",
    r"\d{3}-\d{2}-\d{4}",
    r"^\w+$",
    r"\bDROP\b",
    r"^(a|b)+c?$",
    r"[^ -~]",
    r"\s{2,}",
    r"x$",
    r"^$",
    r"a.b",
    r"^https?://[^/]+/",
    r"[\W\d]+",
    r"(?i)^ok\S*",
    r"\D\s\w",
]
PRINTABLE = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)
ANY_TEXT = st.text(max_size=30)


class _OldPattern:
    """The pattern as the engine ran it before the switch: Python's re, two-valued."""

    engine = "re"

    def __init__(self, text: str) -> None:
        self.text, self.problem, self.regex = text, None, re.compile(text)

    def search(self, actual: str) -> bool:
        return self.regex.search(actual) is not None


def _samples(text: str) -> list[str]:
    # A few inputs that hit each pattern's edges, and the generated text around them.
    return [
        text,
        "URGENT " + text,
        "4111111111111111",
        "dana@example.com",
        "a secret",
        "123-45-6789",
        text + "x",
        text + "x\n",
        "DROP table",
        "ababc",
        "",
        "a\nb",
        "\u0661\u0662\u0663-\u0664\u0665-\u0666\u0667\u0668\u0669",
        "a\u3000\u3000b",
        "caf\u00e9 DROP",
        "ok\u00a0",
        "\u0131",
        "x\u2028",
    ]


def _could_read_differently(pattern: str, sample: str) -> bool:
    """The only inputs on which RE2 may answer UNKNOWN for a pattern both engines compile."""
    return (
        ("\\b" in pattern or "\\B" in pattern)
        and any(ord(c) > 127 and (c.isalnum() or c == "_") for c in sample)
        or ("$" in pattern and sample.endswith("\n"))
        or ("(?i" in pattern and ("\u0131" in sample or "\u0130" in sample))
    )


@settings(max_examples=300, deadline=None)
@given(pattern=st.sampled_from(ORDINARY), text=ANY_TEXT)
def test_re2_answers_as_re_did_except_where_it_says_unknown(pattern, text):
    new, old = patterns.compile_pattern(pattern), _OldPattern(pattern)
    for sample in _samples(text):
        answer = new.search(sample)
        if _could_read_differently(pattern, sample):
            assert answer is None or answer == old.search(sample), (pattern, sample)
        else:
            assert answer == old.search(sample), (pattern, sample)


@pytest.mark.parametrize("shorthand", ["\\d", "\\w", "\\s", "\\D", "\\W", "\\S"])
def test_shorthand_classes_match_exactly_the_characters_re_matches(shorthand):
    # Every code point (surrogates aside), as runs: RE2's reading against re's.
    for low, high in ((0, 0xD7FF), (0xE000, 0x10FFFF)):
        text = "".join(map(chr, range(low, high + 1)))
        ours = patterns.compile_pattern(shorthand + "+")._regex
        assert [m.span() for m in ours.finditer(text)] == [m.span() for m in re.finditer(shorthand + "+", text)]


POLICY_WITH_PATTERNS = [
    *SEED_RULES,
    {
        "name": "urgent_mail",
        "priority": 4,
        "action_type": "send_email",
        "risk_level": "high",
        "conditions": [{"path": "params.subject", "op": "matches", "value": r"(?i)^urgent\b"}],
    },
    {
        "name": "card_numbers",
        "priority": 6,
        "action_type": "*",
        "risk_level": "critical",
        "conditions": [{"path": "params.body", "op": "matches", "value": r"\b[0-9]{16}\b"}],
    },
    {
        "name": "internal_only_low",
        "priority": 7,
        "action_type": "read_*",
        "risk_level": "low",
        "conditions": [{"path": "params.url", "op": "matches", "value": r"^https://intra\.example\.com/"}],
    },
]


@pytest.mark.parametrize("rules", [SEED_RULES, POLICY_WITH_PATTERNS], ids=["seed", "with_patterns"])
@settings(max_examples=150, deadline=None)
@given(
    action_type=st.sampled_from(["send_email", "read_page", "delete_database", "run_job", "get_status"]),
    subject=PRINTABLE,
    body=PRINTABLE,
    url=st.sampled_from(["https://intra.example.com/a", "http://x.test/"]),
    extra=ANY_TEXT,
)
def test_existing_policies_classify_the_same_before_and_after_the_switch(rules, action_type, subject, body, url, extra):
    params = {"to": ["dana@example.com"], "subject": subject, "body": body, "url": url}
    after = _classify(rules, params, action_type)
    original = conditions.compile_pattern
    conditions.compile_pattern = _OldPattern
    try:
        before = _classify(rules, params, action_type)
        exotic = {**params, "subject": subject + extra, "body": extra + body}
        before_exotic = _classify(rules, exotic, action_type)
    finally:
        conditions.compile_pattern = original
    assert (after.risk_level, after.rule_name, after.required_approvals) == (
        before.risk_level,
        before.rule_name,
        before.required_approvals,
    )
    # Outside printable ASCII RE2 may read a pattern as unknown: never less strict than re was.
    after_exotic = _classify(rules, exotic, action_type)
    assert level_rank(after_exotic.risk_level) >= level_rank(before_exotic.risk_level)


# --- Hostile resume schemas, refused at submission -----------------------------------------------

BACKREFERENCE = {"type": "string", "pattern": r"(a)\1"}
NOT_A_STRING = {"type": "string", "pattern": 12}
HIDDEN = "#/x-hidden"


def _behind(keyword: str) -> dict:
    """A property whose `keyword` reaches the hidden schema only through a $ref."""
    ref = {"$ref": HIDDEN}
    shapes = {
        "items": {"type": "array", "items": ref},
        "prefixItems": {"type": "array", "prefixItems": [ref]},
        "additionalProperties": {"type": "object", "additionalProperties": ref},
        "dependentSchemas": {"type": "object", "dependentSchemas": {"a": ref}},
        "if": {"if": ref},
        "then": {"if": {"type": "string"}, "then": ref},
        "else": {"if": {"type": "string"}, "else": ref},
        "not": {"not": ref},
        "contains": {"type": "array", "contains": ref},
        "propertyNames": {"type": "object", "propertyNames": ref},
        "unevaluatedProperties": {"type": "object", "unevaluatedProperties": ref},
    }
    return shapes[keyword]


KEYWORDS = [
    "items",
    "prefixItems",
    "additionalProperties",
    "dependentSchemas",
    "if",
    "then",
    "else",
    "not",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
]


def _refused(response, code: str) -> dict:
    body = response.json()
    assert (response.status_code, body["code"]) == (422, code), body
    assert not ApprovalRequest.objects.exists()
    return body


class TestHostileSchemasAreRefusedAtSubmission:
    @pytest.mark.parametrize("keyword", KEYWORDS)
    def test_a_backreference_behind_a_ref_inside_any_keyword_is_422(self, suspend, keyword):
        schema = {"type": "object", "properties": {"a": _behind(keyword)}, "x-hidden": BACKREFERENCE}
        body = _refused(suspend(resume_schema=schema), "schema_pattern_refused")
        assert body["details"]["path"] == "#/x-hidden/pattern"

    @pytest.mark.parametrize("keyword", KEYWORDS)
    def test_a_non_string_pattern_behind_a_ref_inside_any_keyword_is_422(self, suspend, keyword):
        schema = {"type": "object", "properties": {"a": _behind(keyword)}, "x-hidden": NOT_A_STRING}
        _refused(suspend(resume_schema=schema), "invalid_resume_schema")

    @pytest.mark.parametrize(
        "hidden",
        [
            {"patternProperties": {r"(?=x)": {}}},
            {"properties": {"deeper": {"anyOf": [{"$ref": "#/x-more"}]}}},
            {"not": {"not": {"pattern": r"(a)\1"}}},
        ],
        ids=["patternProperties", "a second ref", "nested"],
    )
    def test_whatever_a_ref_reaches_is_checked_too(self, suspend, hidden):
        schema = {
            "type": "object",
            "properties": {"a": {"$ref": HIDDEN}},
            "x-hidden": hidden,
            "x-more": {"pattern": r"(?<=a)b"},
        }
        assert suspend(resume_schema=schema).json()["code"] in ("schema_pattern_refused",)
        assert not ApprovalRequest.objects.exists()

    def test_a_ref_into_enum_data_is_read_as_the_schema_it_becomes(self, suspend):
        schema = {
            "type": "object",
            "properties": {"a": {"$ref": "#/properties/b/enum/0"}, "b": {"enum": [{"pattern": r"(a)\1"}]}},
        }
        _refused(suspend(resume_schema=schema), "schema_pattern_refused")

    def test_a_ref_to_something_not_a_schema_is_422(self, suspend):
        schema = {"type": "object", "properties": {"a": {"$ref": "#/properties/b/enum"}, "b": {"enum": [1, 2]}}}
        _refused(suspend(resume_schema=schema), "invalid_resume_schema")

    def test_a_loop_an_empty_answer_never_reaches_is_refused(self, suspend):
        schema = {
            "type": "object",
            "$defs": {"a": {"properties": {"x": {"$ref": "#/$defs/b"}}}, "b": {"items": {"$ref": "#/$defs/a"}}},
            "properties": {"tree": {"$ref": "#/$defs/a"}},
        }
        body = _refused(suspend(resume_schema=schema), "invalid_resume_schema")
        assert "loop" in body["message"]

    def test_a_fan_out_of_2_to_the_30_under_a_property_is_refused(self, suspend):
        defs = {f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(30)}
        defs["a30"] = {"type": "string"}
        schema = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/a0"}}}
        body = _refused(suspend(resume_schema=schema), "invalid_resume_schema")
        assert str(resume_schema.MAX_SCHEMA_NODES) in body["message"]

    def test_refs_chained_deeper_than_the_limit_are_refused(self, suspend):
        depth = resume_schema.MAX_REF_DEPTH + 1
        defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(depth)}
        defs[f"d{depth}"] = {"type": "string"}
        schema = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}
        body = _refused(suspend(resume_schema=schema), "invalid_resume_schema")
        assert str(resume_schema.MAX_REF_DEPTH) in body["message"]

    def test_a_nested_id_that_would_move_where_refs_point_is_refused(self, suspend):
        schema = {"type": "object", "properties": {"a": {"$id": "https://x.test/a", "$ref": "#/y"}}}
        _refused(suspend(resume_schema=schema), "invalid_resume_schema")

    def test_the_schema_graph_walk_is_linear_in_the_schema(self, monkeypatch):
        # Every node checked once, however many refs point at it: count the checks.
        calls = []
        original = schema_graph._check_patterns
        monkeypatch.setattr(
            schema_graph, "_check_patterns", lambda node, path: (calls.append(path), original(node, path))
        )
        shared = {"type": "string", "pattern": "^[a-z]+$"}
        schema = {
            "type": "object",
            "$defs": {"s": shared},
            "properties": {f"p{i}": {"$ref": "#/$defs/s"} for i in range(200)},
        }
        resume_schema.check_resume_schema(schema)
        assert len(calls) == 1 + 200 + 1  # the top, each property's ref, $defs/s once: nothing twice

    def test_each_part_of_the_schema_meets_the_metaschema_once(self, monkeypatch):
        # The top's check covers its tree; a target outside it is checked with what it holds, once.
        checked = []
        validator_class = schema_engine._VALIDATORS[resume_schema.DRAFT_2020_12]
        original = validator_class.check_schema.__func__
        monkeypatch.setattr(
            validator_class,
            "check_schema",
            classmethod(lambda cls, schema, **kw: (checked.append(schema), original(cls, schema, **kw))),
        )
        inner = {"type": "string"}
        hidden = {"type": "object", "properties": {"b": inner}}
        schema = {
            "type": "object",
            "$defs": {"s": {"type": "string"}},
            "x-hidden": {"a": hidden},
            "properties": {
                **{f"p{i}": {"$ref": "#/$defs/s"} for i in range(50)},
                **{f"q{i}": {"$ref": "#/x-hidden/a/properties/b"} for i in range(50)},
                "r": {"$ref": "#/x-hidden/a"},
            },
        }
        resume_schema.check_resume_schema(schema)
        assert [id(part) for part in checked] == [id(hidden), id(schema)]


SCHEMA_KEYWORDS = [
    "type",
    "properties",
    "items",
    "prefixItems",
    "additionalProperties",
    "dependentSchemas",
    "if",
    "then",
    "else",
    "not",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "patternProperties",
    "pattern",
    "enum",
    "anyOf",
    "$defs",
    "$ref",
    "$id",
    "uniqueItems",
    "x",
    "format",
]
POINTERS = [
    "#",
    "#/x",
    "#/x/0",
    "#/x/x",
    "#/properties/x",
    "#/properties/x/enum/0",
    "#/$defs/x",
    "#/$defs/x/items",
    "#/anyOf/0",
    "#/not",
    "#/enum",
    "#/x/pattern",
]
hostile_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.sampled_from(
        ["string", "object", "array", r"(a)\1", "^(a+)+$", "(?=a)", "regex", *POINTERS, "https://x.test/s"]
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(SCHEMA_KEYWORDS), inner, max_size=4),
    max_leaves=20,
)
hostile_schemas = st.builds(
    lambda extra: {"type": "object", **extra},
    st.dictionaries(st.sampled_from(SCHEMA_KEYWORDS), hostile_values, max_size=6),
)
small_answers = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["a", "aaa!", "x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["x", "a", "b"]), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=500, deadline=None)
@given(schema=hostile_schemas, answer=st.dictionaries(st.sampled_from(["x", "a", "b"]), small_answers, max_size=3))
def test_a_hostile_schema_and_any_answer_are_answered_with_a_code_never_an_exception(schema, answer):
    try:
        resume_schema.check_resume_schema(schema)
    except DomainError as refused:
        assert refused.code in {
            "invalid_resume_schema",
            "unsupported_schema_draft",
            "schema_ref_refused",
            "schema_pattern_refused",
        }
        return
    try:
        resume_schema.validate_resume_data(schema, answer)
    except DomainError as refused:
        assert refused.code in {"invalid_resume_data", "invalid_resume_schema"}


# --- Answers: bounded, validated before the lock ---------------------------------------------------

UNIQUE = {"type": "object", "properties": {"rows": {"type": "array", "uniqueItems": True}}}


class TestAnswersHaveBoundedCost:
    def test_unique_items_over_6000_objects_is_one_canonical_form_per_item_and_no_pairwise_compare(
        self, monkeypatch, settings
    ):
        import jsonschema._utils

        settings.API_MAX_PARAMS_BYTES = 256 * 1024  # a deployment's larger limit: still linear

        compared = []
        monkeypatch.setattr(jsonschema._utils, "equal", lambda *a: compared.append(a) or False)
        monkeypatch.setattr(jsonschema._utils, "uniq", lambda *a: compared.append(a) or True)
        forms = []
        original = schema_engine._canonical
        monkeypatch.setattr(schema_engine, "_canonical", lambda value: (forms.append(1), original(value))[1])
        rows = [{"id": i, "name": f"n{i}"} for i in range(6000)]
        resume_schema.validate_resume_data(UNIQUE, {"rows": rows})
        assert compared == []
        assert len(forms) <= 3 * len(rows) + 1  # each object and its two values: linear
        with pytest.raises(DomainError) as refused:
            resume_schema.validate_resume_data(UNIQUE, {"rows": [*rows, {"name": "n5", "id": 5.0}]})
        assert refused.value.code == "invalid_resume_data" and refused.value.details["path"] == "/rows"

    def test_unique_items_agrees_with_json_schema_equality(self):
        for same in ([1, 1.0], [{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}], [[None], [None]]):
            with pytest.raises(DomainError):
                resume_schema.validate_resume_data(UNIQUE, {"rows": same})
        for different in ([1, True], [0, False], ["1", 1], [{"a": 1}, {"a": True}], [[1], [[1]]]):
            resume_schema.validate_resume_data(UNIQUE, {"rows": different})

    def test_an_array_over_the_limit_is_refused_before_the_schema_runs(self, monkeypatch):
        monkeypatch.setattr(schema_answers, "_errors", lambda *a: pytest.fail("the schema ran"))
        with pytest.raises(DomainError) as refused:
            resume_schema.validate_resume_data(UNIQUE, {"rows": [0] * (resume_schema.MAX_ANSWER_ITEMS + 1)})
        assert refused.value.code == "invalid_resume_data" and refused.value.details["path"] == "/rows"

    def test_the_dashboard_form_applies_the_apis_size_limit_with_the_apis_code(
        self, pending, client, people, reviewer_client, settings
    ):
        request_id = pending(resume_schema={"type": "object"})
        big = {"approved": True, "note": "x" * (settings.API_MAX_PARAMS_BYTES + 1)}
        from_api = decide(reviewer_client("alice"), request_id, {"decision": "respond", "resume_data": big})
        client.force_login(people["bob"])
        from_page = client.post(
            reverse("approvals:respond", args=[request_id]),
            {"resume_data": json.dumps(big), "revision": "1"},
            HTTP_ACCEPT="application/json",
            HTTP_X_REQUESTED_WITH="XMLHttpRequest",
        )
        assert (from_api.status_code, from_api.json()["code"]) == (422, "validation_error")
        assert (from_page.status_code, from_page.json()["code"]) == (422, "validation_error")
        assert "resume_data" in from_page.json()["details"]["fields"]
        assert ApprovalRequest.objects.get(pk=request_id).resume_data_json == ""

    def test_a_decided_suspension_refuses_any_answer_as_decided_before_reading_it(self, pending, reviewer_client):
        request_id = pending()
        answered = decide(
            reviewer_client("alice"), request_id, {"decision": "respond", "resume_data": {"approved": True}}
        )
        assert answered.json()["state"] == "approved"
        late = decide(reviewer_client("bob"), request_id, {"decision": "respond", "resume_data": {"approved": "no"}})
        assert late.status_code == 409


@pytest.mark.django_db(transaction=True)
def test_the_row_lock_is_never_held_during_answer_validation(require_postgres, people, api):
    """Another transaction holds the request's row lock (SELECT ... FOR UPDATE). An invalid
    answer is refused 422 without waiting for it; a valid one does need the lock (it
    hits the short lock_timeout), which shows the lock was really held."""
    response = api.post("/api/v1/suspensions/", APPROVAL_STEP, format="json")
    assert response.status_code == 201, response.json()
    request_id = response.json()["id"]
    holding, release, done = threading.Event(), threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        from django.db import transaction

        try:
            with transaction.atomic():
                ApprovalRequest.objects.select_for_update().get(pk=request_id)
                holding.set()
                release.wait(30)
        finally:
            connection.close()
            done.set()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    try:
        assert holding.wait(10)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '1s'")
        with pytest.raises(DomainError) as refused:
            respond_to_suspension(
                request_id, actor=Person(people["alice"]), resume_data={"approved": "yes"}, revision=1
            )
        assert refused.value.code == "invalid_resume_data" and refused.value.details["path"] == "/approved"
        with pytest.raises(OperationalError):  # a valid answer waits for the lock, and times out here
            respond_to_suspension(request_id, actor=Person(people["alice"]), resume_data={"approved": True}, revision=1)
    finally:
        release.set()
        holder.join(30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    assert done.is_set()
