"""Action type names: one spelling per name, the documented syntax, and the words inside.

DESIGN.md "Classification fails closed": names are normalized (NFKC, case-folded,
surrounding junk stripped) before matching, names outside the syntax are refused,
and destructive verbs are matched word by word.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approvals.policy.rules.conditions import RuleValidationError
from approvals.policy.rules.names import (
    ActionTypeError,
    ActionTypeName,
    action_words,
    destructive_words,
    normalize_pattern,
    parse_action_type,
    validate_destructive_verbs,
)
from approvals.policy.rules.seed import SEED_DESTRUCTIVE_VERBS

# ---------------------------------------------------------------------------
# parse_action_type
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalized", "sent"),
    [
        ("delete_database", "delete_database", "delete_database"),
        ("Delete_Database", "delete_database", "Delete_Database"),
        ("DELETE_DATABASE", "delete_database", "DELETE_DATABASE"),
        ("delete_database/", "delete_database", "delete_database"),
        ("/delete_database", "delete_database", "delete_database"),
        ("  delete_database\n", "delete_database", "delete_database"),
        ("_delete_database_", "delete_database", "delete_database"),
        ("delete_database.", "delete_database", "delete_database"),
        ("-delete_database-", "delete_database", "delete_database"),
        ("\u200bdelete_database\u200d", "delete_database", "delete_database"),  # zero-width space and joiner
        ("\ufeffdelete_database", "delete_database", "delete_database"),  # byte order mark
        ("\u00a0delete_database\u3000", "delete_database", "delete_database"),  # no-break and ideographic space
        ("ｄｅｌｅｔｅ＿ｄａｔａｂａｓｅ", "delete_database", "delete_database"),  # fullwidth
        ("ⓓelete_database", "delete_database", "delete_database"),  # circled letter
        ("\U0001d41delete_database", "delete_database", "delete_database"),  # mathematical bold d
        ("readAndDeleteDatabase", "readanddeletedatabase", "readAndDeleteDatabase"),
        ("approval-flow.approval", "approval-flow.approval", "approval-flow.approval"),
        ("github.create_issue", "github.create_issue", "github.create_issue"),
        ("s3.put_object", "s3.put_object", "s3.put_object"),
        ("9lives", "9lives", "9lives"),
    ],
)
def test_spellings_of_one_name_normalize_to_it(raw: str, normalized: str, sent: str) -> None:
    assert parse_action_type(raw) == ActionTypeName(normalized=normalized, sent=sent)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("d\u0435lete_database", "U+0435 CYRILLIC SMALL LETTER IE"),
        ("delete_databas\u0435", "CYRILLIC"),  # a lookalike at the end is part of the name, not junk
        ("\u0430pprove", "CYRILLIC"),
        ("del\u03bfte", "GREEK"),  # omicron
        ("delete database", "U+0020"),
        ("delete/database", "'/'"),
        ("delete\tdatabase", "U+0009"),
        ("del\u200dete_database", "ZERO WIDTH JOINER"),
        ("delete_\u0301database", "COMBINING ACUTE ACCENT"),
        ("delet\u0065\u0301_database", "LATIN SMALL LETTER E WITH ACUTE"),  # NFKC composes é
        ("stra\u00dfe", "SHARP S"),  # casefold would give 'strasse'; it is refused first
        ("delete_database\u0663", "ARABIC-INDIC DIGIT"),
        ("delete;database", "';'"),
        ("de*lete", "'*'"),
    ],
)
def test_names_outside_the_syntax_are_refused_with_the_offending_character(raw: str, why: str) -> None:
    with pytest.raises(ActionTypeError) as caught:
        parse_action_type(raw)
    assert why in caught.value.message
    assert "letters, digits, '_', '-' and '.'" in caught.value.message


@pytest.mark.parametrize("raw", ["", "   ", "/", "_-.", "\u200b", 42, None, b"delete"])
def test_empty_or_non_string_names_are_refused(raw: Any) -> None:
    with pytest.raises(ActionTypeError):
        parse_action_type(raw)


def test_at_most_200_characters() -> None:
    assert parse_action_type("a" * 200).normalized == "a" * 200
    with pytest.raises(ActionTypeError, match="200"):
        parse_action_type("a" * 201)
    with pytest.raises(ActionTypeError):
        parse_action_type(" " * 5000 + "a")  # bounded work on an agent's string


def test_action_type_error_is_a_value_error_with_a_message() -> None:
    with pytest.raises(ValueError) as caught:
        parse_action_type("a b")
    assert isinstance(caught.value, ActionTypeError)
    assert str(caught.value) == caught.value.message


@given(raw=st.text(max_size=40))
def test_any_text_parses_to_the_syntax_or_is_refused(raw: str) -> None:
    try:
        name = parse_action_type(raw)
    except ActionTypeError:
        return
    assert name.normalized == name.sent.casefold()
    assert name.normalized.isascii() and name.normalized[0].isalnum() and name.normalized[-1].isalnum()
    assert set(name.normalized) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-.")
    assert parse_action_type(name.sent) == name  # normalizing twice changes nothing
    assert parse_action_type(name.normalized).normalized == name.normalized


# ---------------------------------------------------------------------------
# action_words
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("read_and_delete_database", ("read", "and", "delete", "database")),
        ("readAndDeleteDatabase", ("read", "and", "delete", "database")),
        ("ReadAndDeleteDatabase", ("read", "and", "delete", "database")),
        ("HTTPRequestDelete", ("http", "request", "delete")),
        ("getHTTPResponse", ("get", "http", "response")),
        ("delete-database", ("delete", "database")),
        ("db.delete", ("db", "delete")),
        ("files/delete", ("files", "delete")),
        ("DELETE_DATABASE", ("delete", "database")),
        ("deleteURL", ("delete", "url")),
        ("list_payments_report", ("list", "payments", "report")),
        ("delete2files", ("delete", "2", "files")),  # digits are words of their own
        ("s3Delete", ("s", "3", "delete")),
        ("v2", ("v", "2")),
        ("", ()),
    ],
)
def test_action_words(name: str, words: tuple[str, ...]) -> None:
    assert action_words(name) == words


def test_words_need_the_sent_spelling_to_see_camel_case() -> None:
    name = parse_action_type("readAndDeleteDatabase")
    assert "delete" in action_words(name.sent)
    assert action_words(name.normalized) == ("readanddeletedatabase",)


# ---------------------------------------------------------------------------
# destructive_words
# ---------------------------------------------------------------------------

SEEDED = frozenset(SEED_DESTRUCTIVE_VERBS)


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("read_and_delete_database", ("delete",)),
        ("readAndDeleteDatabase", ("delete",)),
        ("read-and-delete.database", ("delete",)),
        ("read_DELETEall", ("delete",)),  # DELETE|all as well as the acronym reading DELET|Eall
        ("payInvoiceAndSendReceipt", ("pay", "send")),
        ("list_payments_report", ()),  # payments is not pay
        ("undelete_file", ()),
        ("read_file", ()),
        ("shutdown_server", ("shutdown",)),
        ("deleted_items_list", ()),  # whole words only
        ("deLete_files", ("delete",)),  # capitals inside a word never hide it
        ("DeLeTe_files", ("delete",)),
        ("deletE_files", ("delete",)),
    ],
)
def test_destructive_words_match_whole_words(name: str, found: tuple[str, ...]) -> None:
    assert destructive_words(name, SEEDED) == found


# ---------------------------------------------------------------------------
# validate_destructive_verbs
# ---------------------------------------------------------------------------


def test_seeded_verbs_are_valid() -> None:
    assert validate_destructive_verbs(SEED_DESTRUCTIVE_VERBS) == tuple(SEED_DESTRUCTIVE_VERBS)


def test_verbs_are_case_folded_in_order() -> None:
    assert validate_destructive_verbs(["Delete", "DROP", "s3"]) == ("delete", "drop", "s3")


def test_an_empty_verb_list_is_the_admins_choice() -> None:
    assert validate_destructive_verbs([]) == ()


@pytest.mark.parametrize(
    ("value", "field", "message_part"),
    [
        (["delete", ""], "destructive_verbs[1]", "not one word"),
        (["delete", "drop table"], "destructive_verbs[1]", "not one word"),
        (["delete_all"], "destructive_verbs[0]", "not one word"),
        (["d\u0435lete"], "destructive_verbs[0]", "not one word"),
        (["delete", 3], "destructive_verbs[1]", "not a word"),
        (["delete", "Delete"], "destructive_verbs[1]", "twice"),
        ("delete", "destructive_verbs", "list"),
        (None, "destructive_verbs", "list"),
        ([f"v{i}" for i in range(201)], "destructive_verbs", "at most 200"),
    ],
)
def test_bad_verb_lists_are_refused_naming_the_item(value: Any, field: str, message_part: str) -> None:
    with pytest.raises(RuleValidationError) as caught:
        validate_destructive_verbs(value)
    assert caught.value.field == field
    assert message_part in caught.value.message


# ---------------------------------------------------------------------------
# normalize_pattern
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "normalized"),
    [
        ("read_*", "read_*"),
        ("Read_*", "read_*"),
        ("ＲＥＡＤ_*", "read_*"),
        ("[sd]e?ete_*", "[sd]e?ete_*"),
        ("[!x]*", "[!x]*"),
        ("github.*", "github.*"),
        ("approval-flow.*", "approval-flow.*"),
    ],
)
def test_patterns_are_normalized_like_names(pattern: str, normalized: str) -> None:
    assert normalize_pattern(pattern) == normalized


@pytest.mark.parametrize("pattern", ["read *", "read/*", "r\u0435ad_*", "read_{a,b}", "^read"])
def test_patterns_outside_the_syntax_are_refused(pattern: str) -> None:
    with pytest.raises(RuleValidationError) as caught:
        normalize_pattern(pattern)
    assert caught.value.field == "action_type"
