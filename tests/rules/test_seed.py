"""The seeded policy behaves as DESIGN.md describes."""

from __future__ import annotations

from typing import Any

import pytest

from approvals.policy.rules import SEED_RULES, ClassificationInput, CompiledPolicy, PolicyDefaults, RuleSpec


@pytest.fixture(scope="module")
def policy() -> CompiledPolicy:
    return CompiledPolicy.from_dicts(1, SEED_RULES, PolicyDefaults())


def classify(policy: CompiledPolicy, action_type: str, params: dict[str, Any] | None = None) -> tuple[str, str | None]:
    result = policy.classify(ClassificationInput.build(action_type, params or {}, {}))
    return result.risk_level, result.rule_name


def test_seed_rules_are_valid_and_spaced_by_ten() -> None:
    specs = [RuleSpec.from_dict(data) for data in SEED_RULES]
    assert [spec.to_dict() for spec in specs] == [RuleSpec.from_dict(d).to_dict() for d in SEED_RULES]
    assert [spec.priority for spec in specs] == list(range(10, 10 * len(specs) + 1, 10))


def test_delete_database_is_prohibited(policy: CompiledPolicy) -> None:
    assert classify(policy, "delete_database") == ("prohibited", "delete_database_prohibited")


def test_plain_email_is_medium_by_rule(policy: CompiledPolicy) -> None:
    params = {"to": ["ann@example.com", "bob@example.com"], "cc": "cat@example.com", "body": "Lunch?"}
    assert classify(policy, "send_email", params) == ("medium", "send_email_default")


def test_email_to_eleven_people_is_high(policy: CompiledPolicy) -> None:
    params = {
        "to": "ann@example.com",
        "cc": [f"cc{i}@example.com" for i in range(5)],
        "bcc": ", ".join(f"bcc{i}@example.com" for i in range(5)),
        "body": "Hello all",
    }
    assert classify(policy, "send_email", params) == ("high", "send_email_many_recipients_or_sensitive")


def test_email_to_ten_people_with_duplicates_is_medium(policy: CompiledPolicy) -> None:
    params = {"to": [f"p{i}@example.com" for i in range(10)], "cc": "P0@EXAMPLE.COM", "body": "Hello"}
    assert classify(policy, "send_email", params)[0] == "medium"


def test_email_with_card_number_is_high(policy: CompiledPolicy) -> None:
    params = {"to": "ann@example.com", "body": "My card is 4111 1111 1111 1111"}
    assert classify(policy, "send_email", params)[0] == "high"


def test_email_editable_and_masked_params(policy: CompiledPolicy) -> None:
    result = policy.classify(ClassificationInput.build("send_email", {"to": "a@x", "body": "4111111111111111"}))
    assert result.masked_params == ("body",)
    assert set(result.editable_params) == {"subject", "body", "to", "cc", "bcc"}
    assert "4111" not in " ".join(result.explanation)


def test_update_document_is_medium(policy: CompiledPolicy) -> None:
    result = policy.classify(ClassificationInput.build("update_document", {"content": "x"}))
    assert (result.risk_level, result.editable_params) == ("medium", ("content",))


@pytest.mark.parametrize(
    "action_type", ["read_file", "search_web", "list_users", "get_weather", "Read_file", "list_payments_report"]
)
def test_read_only_actions_are_low(policy: CompiledPolicy, action_type: str) -> None:
    # Read_file is read_file (contract change, issue 12: names are case-folded before matching).
    assert classify(policy, action_type)[0] == "low"


@pytest.mark.parametrize("action_type", ["frobnicate", "drop_table", "reader"])
def test_unknown_tools_get_the_medium_default(policy: CompiledPolicy, action_type: str) -> None:
    assert classify(policy, action_type) == ("medium", None)


@pytest.mark.parametrize("action_type", ["Delete_Database", "delete_database/", "DELETE_DATABASE"])
def test_spellings_of_delete_database_are_prohibited(policy: CompiledPolicy, action_type: str) -> None:
    assert classify(policy, action_type) == ("prohibited", "delete_database_prohibited")


@pytest.mark.parametrize(
    "action_type", ["read_and_delete_database", "readAndDeleteDatabase", "get_and_drop_table", "list-then-purge"]
)
def test_read_only_rules_never_auto_approve_a_destructive_verb(policy: CompiledPolicy, action_type: str) -> None:
    assert classify(policy, action_type) == ("medium", None)


def test_the_engines_level_order_is_the_models():
    from approvals.policy.rules.levels import LEVELS
    from approvals.states import RiskLevel

    assert tuple(RiskLevel.values) == LEVELS
    assert [level.rank for level in RiskLevel] == list(range(len(LEVELS)))
