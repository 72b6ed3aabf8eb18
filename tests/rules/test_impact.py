"""Impact facts computed on the server: recipients, amount, counts, sensitivity."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given

from approvals.rules import compute_impact, register_impact_extractor, unregister_impact_extractor

from .strategies import json_values

VISA_TEST_CARD = "4111 1111 1111 1111"
VISA_BAD_CHECKSUM = "4111 1111 1111 1112"


def impact(params: dict[str, Any], target: dict[str, Any] | None = None, action_type: str = "send_email") -> dict[str, Any]:
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
# Amount, target count, reversibility
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "expected"),
    [("100.50", "100.50"), (100, "100"), (0.1, "0.1"), ("lots", None), (True, None), (None, None)],
)
def test_amount_is_a_decimal_string(amount: Any, expected: str | None) -> None:
    assert impact({"amount": amount}, action_type="pay_invoice")["amount"] == expected


def test_amount_absent_is_none() -> None:
    assert impact({})["amount"] is None


@pytest.mark.parametrize(
    ("params", "target", "expected"),
    [({}, {"ids": [1, 2, 3]}, 3), ({"ids": [1, 2]}, {}, 2), ({"targets": ["a"]}, {}, 1), ({"ids": "1,2"}, {}, 1),
     ({}, {}, 1)],
)
def test_target_count(params: dict[str, Any], target: dict[str, Any], expected: int) -> None:
    assert impact(params, target)["target_count"] == expected


@pytest.mark.parametrize(
    ("action_type", "target", "expected"),
    [("delete_file", {}, False), ("drop_table", {}, False), ("send_email", {}, False), ("transfer_funds", {}, False),
     ("pay_invoice", {}, False), ("update_document", {}, True), ("read_file", {}, True),
     ("delete_file", {"reversible": True}, True), ("update_document", {"reversible": False}, False),
     ("delete_file", {"reversible": "yes"}, False)],
)
def test_reversible(action_type: str, target: dict[str, Any], expected: bool) -> None:
    assert impact({}, target, action_type)["reversible"] is expected


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
def test_duplicate_extractor_pattern_refused() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_impact_extractor("transfer_*")(lambda params, target, base: {})
