"""Rule patterns run in linear time (DESIGN.md), issue 22 item 3: conditions match with RE2,
stored patterns RE2 cannot run are refused as they are read, RE2 answers as `re` did (except
where it says it cannot know), and existing policies classify the same after the switch.

Nothing here measures time: each test asserts which engine ran, what was refused and with
which field, or counts operations. A backtracking engine is shown not to be called at all.
"""

from __future__ import annotations

import json
import re

import pytest
import re2
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals import policy
from approvals.models import PolicyVersion, RiskRule
from approvals.people import Person
from approvals.policy.rules import conditions, patterns
from approvals.policy.rules.engine import ClassificationInput, CompiledPolicy, PolicyDefaults, RuleSpec
from approvals.policy.rules.levels import level_rank
from approvals.policy.rules.seed import SEED_RULES

from ..suspensions.conftest import (
    agent_api_settings,
    api,
    fresh_counters,
    pending,
    reviewer_client,
    suspend,
)
from .re2_cases import CATASTROPHIC, _classify, _NoBacktracking, _rule

__all__ = ["agent_api_settings", "api", "fresh_counters", "pending", "reviewer_client", "suspend"]


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
