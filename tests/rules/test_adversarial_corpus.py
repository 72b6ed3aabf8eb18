"""An adversarial corpus: no spelling of a call is classified below the call written plainly.

Issue 12, attack 3: agent-supplied spellings lowered the server's risk. Every item
here is a canonical call (written plainly) and a variant an agent might send
instead. The property, per item: the variant is refused (ActionTypeError, the
API's 422) or classified no lower, by (level rank, required approvals), than its
canonical form. A hypothesis test then mutates canonical calls at random.

The policy is realistic: the seed rules plus a wire rule (over 1,000,000 is
critical with two treasury approvals), a delete_files rule counting targets, a
payment threshold on a param, and a low deploy rule conditioned on the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approvals.policy.rules import (
    SEED_RULES,
    ActionTypeError,
    Classification,
    ClassificationInput,
    CompiledPolicy,
    PolicyDefaults,
    strictness,
)

OVER_A_MILLION = {"path": "impact.amount", "op": "gt", "value": 1_000_000}
POLICY_RULES: list[dict[str, Any]] = [
    *SEED_RULES,
    {
        "name": "wire_critical",
        "priority": 100,
        "action_type": "wire_funds",
        "risk_level": "critical",
        "required_approvals": 2,
        "approver_group": "treasury",
        "conditions": [OVER_A_MILLION],
    },
    {"name": "wire_high", "priority": 110, "action_type": "wire_funds", "risk_level": "high"},
    # An admin's shortcut the issue's attacker abused: reversible deletes run at once.
    {
        "name": "delete_files_reversible",
        "priority": 120,
        "action_type": "delete_files",
        "risk_level": "low",
        "conditions": [{"path": "impact.reversible", "op": "eq", "value": True}],
    },
    {
        "name": "delete_files_many",
        "priority": 130,
        "action_type": "delete_files",
        "risk_level": "high",
        "required_approvals": 2,
        "conditions": [{"path": "impact.target_count", "op": "gt", "value": 10}],
    },
    {"name": "delete_files", "priority": 140, "action_type": "delete_files", "risk_level": "medium"},
    {
        "name": "pay_invoice_large",
        "priority": 150,
        "action_type": "pay_invoice",
        "risk_level": "high",
        "conditions": [{"path": "params.total", "op": "gte", "value": 10_000}],
    },
    {"name": "pay_invoice", "priority": 160, "action_type": "pay_invoice", "risk_level": "medium"},
    {
        "name": "deploy_staging_low",
        "priority": 170,
        "action_type": "deploy_*",
        "risk_level": "low",
        "conditions": [{"path": "target.environment", "op": "eq", "value": "staging"}],
    },
    {"name": "deploy", "priority": 180, "action_type": "deploy_*", "risk_level": "high"},
    {"name": "report_low", "priority": 190, "action_type": "report*", "risk_level": "low"},
]
POLICY = CompiledPolicy.from_dicts(1, POLICY_RULES, PolicyDefaults())


@dataclass(frozen=True)
class Call:
    action_type: str
    params: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] = field(default_factory=dict)
    declared: dict[str, Any] = field(default_factory=dict)

    def classify(self) -> Classification:
        return POLICY.classify(ClassificationInput.build(self.action_type, self.params, self.target, self.declared))

    def but(self, **changes: Any) -> Call:
        return Call(**{**self.__dict__, **changes})


def key(result: Classification) -> tuple[int, int]:
    return strictness(result.risk_level, result.required_approvals)


def assert_no_lower(canonical: Call, variant: Call) -> None:
    """The corpus property: refused, or at least as strict as the call written plainly."""
    try:
        got = variant.classify()
    except ActionTypeError:
        return
    expected = canonical.classify()
    assert key(got) >= key(expected), (
        f"{variant!r} classified {got.risk_level}/{got.required_approvals} by {got.rule_name!r}: {got.reason}; "
        f"written plainly it is {expected.risk_level}/{expected.required_approvals} by {expected.rule_name!r}"
    )


HUNDRED_IDS = list(range(100))
DELETE_MANY = Call("delete_files", {"ids": HUNDRED_IDS})
DELETE_FEW = Call("delete_files", {"ids": [1, 2, 3]})
WIRE = Call("wire_funds", {"amount": 2_500_000, "to": "acct-1"})
WIRE_FIVE_MILLION = Call("wire_funds", {"amount": 5_000_000, "to": "acct-1"})
PAY = Call("pay_invoice", {"total": 50_000})
DELETE_DATABASE = Call("delete_database")
DEPLOY_PROD = Call("deploy_app", target={"environment": "production"})
READ_AND_DELETE = Call("read_and_delete_database")
REPORT_AND_DELETE = Call("report_and_delete_logs")

# (id, canonical, variant)
CORPUS: list[tuple[str, Call, Call]] = [
    # --- attack 3, as the issue reports it -----------------------------------------
    ("reversible-true-hides-a-two-approval-delete", DELETE_MANY, DELETE_MANY.but(target={"reversible": True})),
    ("reversible-true-on-a-few-deletes", DELETE_FEW, DELETE_FEW.but(target={"reversible": True})),
    ("target-ids-hide-100-params-ids", DELETE_MANY, DELETE_MANY.but(target={"ids": [1]})),
    ("target-ids-only", DELETE_MANY, Call("delete_files", target={"ids": [1]})),
    ("ids-under-IDs", DELETE_MANY, Call("delete_files", {"IDs": HUNDRED_IDS})),
    ("ids-as-a-string", DELETE_MANY, Call("delete_files", {"ids": ",".join(map(str, HUNDRED_IDS))})),
    ("amount-5e6", WIRE_FIVE_MILLION, WIRE.but(params={"amount": "5e6", "to": "acct-1"})),
    ("amount-2,500,000", WIRE, WIRE.but(params={"amount": "2,500,000", "to": "acct-1"})),
    ("amount-leading-space", WIRE, WIRE.but(params={"amount": " 2500000", "to": "acct-1"})),
    ("amount-value-currency", WIRE, WIRE.but(params={"amount": {"value": 2_500_000, "currency": "USD"}})),
    ("amount-under-Amount", WIRE, WIRE.but(params={"Amount": 2_500_000, "to": "acct-1"})),
    ("amount-under-AMOUNT", WIRE, WIRE.but(params={"AMOUNT": "2500000"})),
    ("Delete_Database", DELETE_DATABASE, Call("Delete_Database")),
    ("delete_database/", DELETE_DATABASE, Call("delete_database/")),
    ("DELETE_DATABASE", DELETE_DATABASE, Call("DELETE_DATABASE")),
    ("read_and_delete_database", Call("update_document"), READ_AND_DELETE),  # at least medium: never low
    ("readAndDeleteDatabase", READ_AND_DELETE, Call("readAndDeleteDatabase")),
    ("reportAndDeleteLogs", REPORT_AND_DELETE, Call("reportAndDeleteLogs")),
    # --- amounts written other ways ------------------------------------------------
    ("amount-2.5E+6", WIRE, WIRE.but(params={"amount": "2.5E+6"})),
    ("amount-exponent-too-large", WIRE, WIRE.but(params={"amount": "1e99"})),
    ("amount-european-grouping", WIRE, WIRE.but(params={"amount": "2.500.000"})),
    ("amount-dollar-sign", WIRE, WIRE.but(params={"amount": "$2,500,000"})),
    ("amount-5-million", WIRE, WIRE.but(params={"amount": "5 million"})),
    ("amount-fullwidth-digits", WIRE, WIRE.but(params={"amount": "２５０００００"})),
    ("amount-no-break-spaces", WIRE, WIRE.but(params={"amount": "2\u00a0500\u00a0000"})),
    ("amount-in-a-list", WIRE, WIRE.but(params={"amount": [2_500_000]})),
    ("amount-null", WIRE, WIRE.but(params={"amount": None})),
    ("amount-two-keys-disagree", WIRE, WIRE.but(params={"amount": 500, "Amount": 2_500_000})),
    ("amount-value-nested", WIRE, WIRE.but(params={"amount": {"value": {"value": 2_500_000}}})),
    ("amount-value-with-cents", WIRE, WIRE.but(params={"amount": {"value": 25, "cents": 250_000_000}})),
    ("amount-nested-under-another-key", WIRE, WIRE.but(params={"transfer": {"amount": 2_500_000}})),
    ("amount-fullwidth-key", WIRE, WIRE.but(params={"ａｍｏｕｎｔ": 2_500_000})),
    ("param-threshold-5e4", PAY, PAY.but(params={"total": "5e4"})),
    ("param-threshold-50,000", PAY, PAY.but(params={"total": "50,000"})),
    ("param-threshold-object", PAY, PAY.but(params={"total": {"value": 50_000}})),
    ("param-threshold-missing", PAY, PAY.but(params={"Total": 50_000})),
    ("param-threshold-bool", PAY, PAY.but(params={"total": True})),
    # --- what the agent says about its target or itself ------------------------------
    ("target-environment-staging", DEPLOY_PROD, DEPLOY_PROD.but(target={"environment": "staging"})),
    ("target-environment-Staging", DEPLOY_PROD, DEPLOY_PROD.but(target={"environment": "Staging"})),
    ("declared-safe", DELETE_MANY, DELETE_MANY.but(declared={"reversible": True, "safe": True})),
    ("declared-amount", WIRE, WIRE.but(declared={"amount": 1})),
    # --- case, width and surrounding junk ------------------------------------------
    *(
        (f"delete_database-spelled-{label}", DELETE_DATABASE, Call(spelling))
        for label, spelling in [
            ("leading-space", " delete_database"),
            ("trailing-newline", "delete_database\n"),
            ("crlf", "delete_database\r\n"),
            ("tab", "\tdelete_database"),
            ("no-break-space", "\u00a0delete_database"),
            ("em-space", "delete_database\u2003"),
            ("ideographic-space", "\u3000delete_database"),
            ("slashes", "/delete_database/"),
            ("dots", "..delete_database."),
            ("underscores", "__delete_database__"),
            ("zero-width-space-edge", "\u200bdelete_database"),
            ("zero-width-joiner-edge", "delete_database\u200d"),
            ("byte-order-mark", "\ufeffdelete_database"),
            ("word-joiner", "\u2060delete_database"),
            ("fullwidth", "ｄｅｌｅｔｅ＿ｄａｔａｂａｓｅ"),
            ("fullwidth-mixed", "DELETE＿database"),
            ("circled", "ⓓⓔⓛⓔⓣⓔ_database"),
            ("mathematical-bold", "\U0001d41d\U0001d41e\U0001d425\U0001d41e\U0001d42d\U0001d41e_database"),
            ("ligature-free", "Delete_DataBase"),
            ("combining-mark-trailing-junk", "delete_database/\u0301"),
        ]
    ),
    # --- confusables inside the name: refused --------------------------------------
    *(
        (f"delete_database-confusable-{label}", DELETE_DATABASE, Call(spelling))
        for label, spelling in [
            ("cyrillic-e", "d\u0435lete_database"),
            ("cyrillic-a", "delete_dat\u0430base"),
            ("cyrillic-edge", "delete_databas\u0435"),
            ("greek-omicron", "delete_database\u03bf"),
            ("greek-alpha", "delete_d\u03b1tabase"),
            ("zero-width-joiner-inside", "del\u200dete_database"),
            ("zero-width-space-inside", "delete_\u200bdatabase"),
            ("soft-hyphen-inside", "dele\u00adte_database"),
            ("combining-acute", "dele\u0301te_database"),
            ("combining-after-underscore", "delete_\u0301database"),
            ("inner-space", "delete database"),
            ("inner-slash", "delete/database"),
            ("inner-no-break-space", "delete\u00a0database"),
            ("dotless-i-lookalike", "delete_database\u0131"),
        ]
    ),
    # --- low rules and destructive verbs ---------------------------------------------
    ("read_file-shouting", Call("read_file"), Call("READ_FILE")),
    ("list_payments_report", Call("list_payments_report"), Call("List_Payments_Report")),
    ("read-DELETE-all", Call("update_document"), Call("read_DELETEall")),
    ("get-then-drop", Call("update_document"), Call("get_and_drop_table")),
    ("search-kebab-purge", Call("update_document"), Call("search-and-purge")),
    ("list-dotted-wipe", Call("update_document"), Call("list.wipe.all")),
    ("read-camel-transfer", Call("update_document"), Call("read_thenTransferFunds")),
    ("odd-capitals-inside-a-verb", DELETE_FEW, Call("deLeTe_files", {"ids": [1, 2, 3]}, {"reversible": True})),
    (
        "recipients-under-fullwidth-key",
        Call("send_email", {"to": [f"p{i}@x.example" for i in range(12)]}),
        Call("send_email", {"ｔｏ": [f"p{i}@x.example" for i in range(12)]}),
    ),
]


@pytest.mark.parametrize(("canonical", "variant"), [(c, v) for _, c, v in CORPUS], ids=[i for i, _, _ in CORPUS])
def test_no_variant_is_classified_below_its_canonical_form(canonical: Call, variant: Call) -> None:
    assert_no_lower(canonical, variant)


# What the issue saw, stated outright (the property above already covers it).


def test_the_issues_attacks_now_get_the_strict_answer() -> None:
    assert key(DELETE_MANY.but(target={"reversible": True}).classify()) == (2, 2)  # high, two approvals
    assert DELETE_MANY.but(target={"ids": [1]}).classify().rule_name == "delete_files_many"
    for written in ("5e6", "2,500,000", " 2500000", {"value": 2_500_000, "currency": "USD"}):
        assert Call("wire_funds", {"amount": written}).classify().rule_name == "wire_critical"
    assert Call("wire_funds", {"Amount": 2_500_000}).classify().rule_name == "wire_critical"
    for spelling in ("Delete_Database", "delete_database/", "DELETE_DATABASE"):
        assert Call(spelling).classify().risk_level == "prohibited"
    for spelling in ("read_and_delete_database", "readAndDeleteDatabase"):
        assert Call(spelling).classify().risk_level != "low"


@pytest.mark.parametrize("spelling", [s for i, _, v in CORPUS if "confusable" in i for s in [v.action_type]])
def test_confusables_inside_a_name_are_refused(spelling: str) -> None:
    with pytest.raises(ActionTypeError):
        Call(spelling).classify()


# ---------------------------------------------------------------------------
# Random mutations of canonical calls
# ---------------------------------------------------------------------------

CANONICAL = [
    DELETE_MANY,
    DELETE_FEW,
    WIRE,
    WIRE.but(params={"amount": 500}),
    PAY,
    PAY.but(params={"total": 5}),
    DELETE_DATABASE,
    DEPLOY_PROD,
    READ_AND_DELETE,
    REPORT_AND_DELETE,
    Call("read_file"),
    Call("send_email", {"to": [f"p{i}@example.com" for i in range(12)]}),
]
# Not among them: camelCase names such as readAndDeleteDatabase. Their lower-case
# spelling (readanddeletedatabase) has no word boundary left, so it is one word by
# design (DESIGN.md: verbs are whole words, so list_payments_report is not "pay").
JUNK = [" ", "\t", "\n", "\u00a0", "\u2003", "\u3000", "\u200b", "\u200d", "\ufeff", "\u2060", "/", "_", ".", "-"]
INSIDE = ["\u200d", "\u200b", "\u00ad", "\u0301", "\u0435", "\u03bf", "\u0131", " ", "/"]


def fullwidth(char: str) -> str:
    return chr(ord(char) + 0xFEE0) if "!" <= char <= "~" else char


@st.composite
def spellings(draw: st.DrawFn, name: str) -> str:
    chars = [draw(st.sampled_from([c, c.upper(), c.lower(), fullwidth(c), fullwidth(c.upper())])) for c in name]
    if draw(st.booleans()):
        chars.insert(draw(st.integers(0, len(chars))), draw(st.sampled_from(INSIDE)))
    junk = st.lists(st.sampled_from(JUNK), max_size=3).map("".join)
    return draw(junk) + "".join(chars) + draw(junk)


def amount_spellings(value: int) -> list[Any]:
    return [
        value,
        str(value),
        f"{value:,}",
        f" {value} ",
        f"{value:e}",
        f"{value:_}",
        float(value),
        {"value": value, "currency": "USD"},
        {"VALUE": str(value)},
        f"{value:,}".replace(",", " "),
        f"${value:,}",
        f"{value / 1_000_000} million",
        [value],
        None,
    ]


@st.composite
def variants(draw: st.DrawFn, call: Call) -> Call:
    params = dict(call.params)
    target = dict(call.target)
    for name in [k for k in params if k in ("amount", "total")]:
        value = params.pop(name)
        spelled_key = draw(st.sampled_from([name, name.upper(), name.capitalize(), f" {name}"]))
        params[spelled_key] = draw(st.sampled_from(amount_spellings(value)))
    if "ids" in params and draw(st.booleans()):
        target["ids"] = draw(st.lists(st.sampled_from(params["ids"]), max_size=3))
    if draw(st.booleans()):
        target["reversible"] = draw(st.booleans())
    if "environment" in target and draw(st.booleans()):
        target["environment"] = draw(st.sampled_from(["staging", "Staging", "dev", ""]))
    declared = draw(st.sampled_from([{}, {"reversible": True}, {"safe": True, "amount": 1}]))
    return Call(draw(spellings(call.action_type)), params, target, declared)


@given(data=st.data(), canonical=st.sampled_from(CANONICAL))
def test_random_spellings_and_params_are_never_classified_lower(data: st.DataObject, canonical: Call) -> None:
    assert_no_lower(canonical, data.draw(variants(canonical)))
