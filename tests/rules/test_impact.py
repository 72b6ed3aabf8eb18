"""Impact facts computed on the server: recipients, amount, counts, sensitivity."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given

from approvals.policy.rules.impact import compute_impact, register_impact_extractor, unregister_impact_extractor
from approvals.policy.rules.names import ActionTypeError

from .strategies import json_values

VISA_TEST_CARD = "4111 1111 1111 1111"
VISA_BAD_CHECKSUM = "4111 1111 1111 1112"


def impact(
    params: dict[str, Any], target: dict[str, Any] | None = None, action_type: str = "send_email"
) -> dict[str, Any]:
    return compute_impact(action_type, params, target or {})


# ---------------------------------------------------------------------------
# Recipients
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"to": "a@x"}, 1),
        ({"to": "a@x", "cc": "a@x"}, 1),  # the same person in to and cc counts once
        ({"to": "Alice <A@X>", "bcc": ["a@x"]}, 1),
        ({"to": "a@x, b@x; c@x"}, 3),
        ({"to": ["a@x", "b@x"], "cc": "c@x;d@x", "bcc": ["e@x"]}, 5),
        ({"to": '"Doe, Jane" <jane@x>, bob@x'}, 2),
        ({"to": [{"name": "Ann", "email": "ANN@x"}, "ann@x"]}, 1),
        ({"to": "a@x\nb@x"}, 2),
        ({"To": "a@x", "CC": "b@x"}, 2),
        ({"ｔｏ": "a@x", " bcc": "b@x"}, 2),  # fullwidth or padded keys hide no one
        ({"to": "", "cc": [], "bcc": None}, 0),
        ({"subject": "a@x"}, 0),
    ],
)
def test_recipient_count(params: dict[str, Any], expected: int) -> None:
    assert impact(params)["recipient_count"] == expected


def test_eleven_recipients_spread_over_cc_and_bcc() -> None:
    params = {"to": "a0@x", "cc": [f"c{i}@x" for i in range(5)], "bcc": ",".join(f"b{i}@x" for i in range(5))}
    assert impact(params)["recipient_count"] == 11


# ---------------------------------------------------------------------------
# Amount: read with certainty, or reported unknown (never guessed low)
# ---------------------------------------------------------------------------


def amount_of(params: dict[str, Any]) -> tuple[str | None, bool]:
    """(impact.amount, whether "amount" is listed unknown)."""
    result = impact(params, action_type="wire_funds")
    return result["amount"], "amount" in result["unknown"]


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("100.50", "100.50"),
        (100, "100"),
        (0.1, "0.1"),
        (Decimal("2500000.00"), "2500000.00"),
        (2_500_000, "2500000"),
        ("2500000", "2500000"),
        (" 2500000", "2500000"),  # surrounding whitespace
        ("2500000\n", "2500000"),
        ("+2500000", "2500000"),
        ("-250", "-250"),
        ("2,500,000", "2500000"),  # thousands separators in groups of three
        ("2,500,000.75", "2500000.75"),
        ("2 500 000", "2500000"),
        ("2\u00a0500\u00a0000", "2500000"),  # no-break spaces (NFKC makes them spaces)
        ("2_500_000", "2500000"),
        ("25_00_000", "2500000"),  # underscores never mean a decimal point
        ("5e6", "5000000"),
        ("2.5E+6", "2500000"),
        ("1e-2", "0.01"),
        (".5", "0.5"),
        ("２５０００００", "2500000"),  # fullwidth digits
        ({"value": 2500000, "currency": "USD"}, "2500000"),
        ({"Value": "2,500,000", "CURRENCY": "USD"}, "2500000"),
        ({"value": "5e6"}, "5000000"),
    ],
)
def test_amounts_written_many_ways_read_the_same(written: Any, expected: str) -> None:
    assert amount_of({"amount": written}) == (expected, False)


@pytest.mark.parametrize(
    "written",
    [
        None,
        True,
        "",
        "lots",
        "5 million",
        "$2,500,000",  # currency symbols are not parsed: send {"value", "currency"}
        "USD 2500000",
        "2.500.000",  # European grouping: could be 2.5
        "2,50,000",  # not groups of three
        "2,5",  # a decimal comma?
        "1e31",  # exponent beyond 30
        "1e-31",
        "NaN",
        "Infinity",
        float("nan"),
        float("inf"),
        [2500000],
        {"value": {"value": 2500000}},
        {"value": 1, "cents": 250000000},  # something besides value and currency
        {"currency": "USD"},
        {"value": 1, "Value": 2},
        "1" * 101,
    ],
)
def test_an_amount_present_but_unreadable_is_unknown(written: Any) -> None:
    assert amount_of({"amount": written}) == (None, True)


@pytest.mark.parametrize("key", ["Amount", "AMOUNT", "amount_", " amount", "ａｍｏｕｎｔ"])
def test_amount_keys_match_case_insensitively(key: str) -> None:
    assert amount_of({key: 2_500_000}) == ("2500000", False)


def test_two_amount_keys_that_agree_read_as_one() -> None:
    assert amount_of({"amount": 2_500_000, "Amount": "2,500,000"}) == ("2500000", False)


def test_two_amount_keys_that_differ_are_unknown() -> None:
    assert amount_of({"amount": 500, "Amount": 2_500_000}) == (None, True)


@pytest.mark.parametrize(
    "params",
    [
        {"payment": {"amount": 2_500_000}},
        {"items": [{"amount": 10}, {"amount": 20}]},
        {"amount": 5, "legs": [{"Amount": 2_500_000}]},
    ],
)
def test_an_amount_nested_deeper_is_unknown(params: dict[str, Any]) -> None:
    assert amount_of(params) == (None, True)


def test_no_amount_at_all_is_none_and_not_unknown() -> None:
    assert amount_of({}) == (None, False)
    assert amount_of({"amounts": [1, 2], "total_amount": 5}) == (None, False)


# ---------------------------------------------------------------------------
# Target count
# ---------------------------------------------------------------------------


def count_of(params: dict[str, Any], target: dict[str, Any] | None = None) -> tuple[int, bool]:
    """(impact.target_count, whether "target_count" is listed unknown)."""
    result = impact(params, target, action_type="delete_files")
    return result["target_count"], "target_count" in result["unknown"]


@pytest.mark.parametrize(
    ("params", "target", "expected"),
    [
        ({"ids": [1, 2]}, {}, (2, False)),
        ({"targets": ["a"]}, {}, (1, False)),
        ({"IDs": [1, 2, 3]}, {}, (3, False)),
        ({"ids": [1, 2], "targets": ["a"]}, {}, (3, False)),  # several lists add up
        ({"ids": []}, {}, (0, False)),
        ({}, {}, (1, False)),
        ({"ids": [1, 2]}, {"ids": [2, 1]}, (2, False)),  # the agent's target agrees with its params
        ({"ids": [{"a": 1}]}, {"ids": [{"a": 1}]}, (1, False)),
    ],
)
def test_target_count_read_with_certainty(
    params: dict[str, Any], target: dict[str, Any], expected: tuple[int, bool]
) -> None:
    assert count_of(params, target) == expected


@pytest.mark.parametrize(
    ("params", "target", "shown"),
    [
        ({"ids": list(range(100))}, {"ids": [1]}, 100),  # target.ids hiding 100 params.ids
        ({"ids": [1, 2]}, {"ids": [1, 3]}, 2),
        ({"ids": [1]}, {"ids": [True]}, 1),  # canonical JSON: true is not 1
        ({}, {"ids": [1, 2, 3]}, 3),  # only the agent vouches for target.ids
        ({"ids": "1,2"}, {}, 1),  # not a list
        ({"ids": [1], "targets": "a"}, {}, 1),
        ({"ids": [1]}, {"ids": "1"}, 1),
    ],
)
def test_target_count_unknown(params: dict[str, Any], target: dict[str, Any], shown: int) -> None:
    assert count_of(params, target) == (shown, True)


# ---------------------------------------------------------------------------
# Reversibility: computed from the action type; the agent can only make it stricter
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action_type", "target", "expected"),
    [
        ("delete_file", {}, False),
        ("drop_table", {}, False),
        ("send_email", {}, False),
        ("transfer_funds", {}, False),
        ("pay_invoice", {}, False),
        ("purge_cache", {}, False),
        ("files.delete", {}, False),  # a word test, not a prefix test
        ("bulkDeleteFiles", {}, False),  # camelCase words count
        ("read_and_delete_database", {}, False),
        ("update_document", {}, True),
        ("read_file", {}, True),
        ("undelete_file", {}, True),
        ("delete_file", {"reversible": True}, False),  # a declaration, never an impact fact
        ("update_document", {"reversible": False}, False),  # the agent may say it is stricter
        ("update_document", {"reversible": "no"}, True),
        ("delete_file", {"reversible": "yes"}, False),
    ],
)
def test_reversible(action_type: str, target: dict[str, Any], expected: bool) -> None:
    assert impact({}, target, action_type)["reversible"] is expected


def test_the_policys_destructive_verbs_also_make_a_call_irreversible() -> None:
    assert compute_impact("archive_project", {}, {})["reversible"] is True
    assert compute_impact("archive_project", {}, {}, destructive_verbs=["archive"])["reversible"] is False
    # Passing a shorter list never makes the built-in irreversible verbs reversible.
    assert compute_impact("delete_file", {}, {}, destructive_verbs=[])["reversible"] is False


def test_unknown_is_always_present_and_sorted() -> None:
    assert impact({})["unknown"] == []
    both = compute_impact("wire_funds", {"amount": "5 million", "ids": "x"}, {})
    assert both["unknown"] == ["amount", "target_count"]


def test_an_invalid_action_type_is_refused() -> None:
    with pytest.raises(ActionTypeError):
        compute_impact("d\u0435lete_file", {}, {})


# ---------------------------------------------------------------------------
# Sensitive content
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "target", "kinds"),
    [
        ({"body": f"card {VISA_TEST_CARD} exp 12/30"}, {}, ["card_number"]),
        ({"body": "4111-1111-1111-1111"}, {}, ["card_number"]),
        ({"body": "4111111111111111"}, {}, ["card_number"]),
        ({"body": f"card {VISA_BAD_CHECKSUM}"}, {}, []),
        ({"body": "order 4111111111111111111111"}, {}, []),  # too long a run to be a card
        ({"body": "ssn 123-45-6789"}, {}, ["national_id"]),
        ({"body": "ssn 000-45-6789 666-45-6789 912-45-6789"}, {}, []),
        ({"body": "key AKIAIOSFODNN7EXAMPLE"}, {}, ["secret"]),
        ({"body": "-----BEGIN RSA PRIVATE KEY-----\nMIIE"}, {}, ["secret"]),
        ({"body": "ghp_" + "a1" * 18}, {}, ["secret"]),
        ({"body": "sk-" + "x" * 24}, {}, ["secret"]),
        ({"body": "sk-short"}, {}, []),
        ({"db_password": "hunter2"}, {}, ["secret"]),
        ({"apiKey": "abc"}, {}, ["secret"]),
        ({"password": ""}, {}, []),
        ({"max_tokens": 100}, {}, []),
        ({"nested": [{"deeper": {"note": "ssn 123-45-6789"}}]}, {}, ["national_id"]),
        ({}, {"labels": ["PII", "internal", "financial"]}, ["label:financial", "label:pii"]),
        ({"body": "hello"}, {"labels": ["public"]}, []),
    ],
)
def test_sensitive_kinds(params: dict[str, Any], target: dict[str, Any], kinds: list[str]) -> None:
    result = impact(params, target)
    assert result["sensitive_kinds"] == kinds
    assert result["sensitive"] is bool(kinds)


def test_sensitive_labels_are_configurable() -> None:
    result = compute_impact("x", {}, {"labels": ["hr"]}, sensitive_labels={"hr"})
    assert result["sensitive_kinds"] == ["label:hr"]


def test_oversized_params_are_not_assumed_clean() -> None:
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    assert "unscanned" in impact({"body": deep})["sensitive_kinds"]


@given(params=json_values, target=json_values)
def test_any_json_gives_json_safe_impact(params: Any, target: Any) -> None:
    params = params if isinstance(params, dict) else {"value": params}
    target = target if isinstance(target, dict) else {}
    result = compute_impact("send_email", params, target)
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    assert not any(isinstance(value, float) for value in result.values())


# ---------------------------------------------------------------------------
# Extractor registry
# ---------------------------------------------------------------------------


@pytest.fixture
def extractors() -> Iterator[None]:
    @register_impact_extractor("transfer_*")
    def transfer(params: Mapping[str, Any], target: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
        return {"currency": params.get("currency", "EUR"), "amount": params.get("value"), "sensitive": False}

    @register_impact_extractor("transfer_funds")
    def funds(params: Mapping[str, Any], target: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
        return {"currency": "USD", "sensitive_kinds": ["financial_transfer"]}

    yield
    unregister_impact_extractor("transfer_*")
    unregister_impact_extractor("transfer_funds")


@pytest.mark.usefixtures("extractors")
def test_extractors_add_keys_most_specific_last() -> None:
    result = compute_impact("transfer_funds", {"value": 12.5, "note": "ssn 123-45-6789"}, {})
    assert result["currency"] == "USD"  # the literal pattern overrides the glob
    assert result["amount"] == "12.5"  # floats from an extractor become decimal strings
    # An extractor may add sensitive kinds but never clear what the detectors found.
    assert result["sensitive"] is True
    assert result["sensitive_kinds"] == ["financial_transfer", "national_id"]


@pytest.mark.usefixtures("extractors")
def test_extractor_glob_scope() -> None:
    assert compute_impact("transfer_stock", {}, {})["currency"] == "EUR"
    assert "currency" not in compute_impact("send_email", {}, {})


@pytest.mark.usefixtures("extractors")
def test_extractors_match_normalized_names() -> None:
    assert compute_impact("Transfer_Funds", {}, {})["currency"] == "USD"


def test_an_extractor_may_add_unknown_facts_but_never_remove_them() -> None:
    @register_impact_extractor("wire_*")
    def wire(params: Mapping[str, Any], target: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
        return {"amount": "12.5", "unknown": ["fx_rate"]}

    try:
        result = compute_impact("wire_funds", {"amount": "5 million"}, {})
    finally:
        unregister_impact_extractor("wire_*")
    assert result["amount"] == "12.5"
    assert result["unknown"] == ["amount", "fx_rate"]  # its own amount does not make the agent's readable


@pytest.mark.usefixtures("extractors")
def test_duplicate_extractor_pattern_refused() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_impact_extractor("transfer_*")(lambda params, target, base: {})
