"""Rule names are slugs: they appear in URLs (/rules/<name>/edit/), audit rows and CSV
cells, so a name that would break one of them is refused where it is typed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approvals.policy.rules import RuleSpec, RuleValidationError

from .test_engine import rule

GOOD = ["send_email_default", "Treasury-2", "wire.finance", "a"]
BAD = ["a/b", "../admin", "", " padded", "two words", "-leading", "x" * 101, "é", "a\x00b", "a%2fb"]


@pytest.mark.parametrize("name", GOOD)
def test_slug_names_are_accepted(name):
    assert rule(name).name == name


@pytest.mark.parametrize("name", BAD)
def test_names_that_would_break_a_url_or_a_cell_are_refused_naming_the_field(name):
    with pytest.raises(RuleValidationError) as refused:
        rule(name)
    assert refused.value.field == "name"


@given(st.text(max_size=120))
def test_any_accepted_name_is_a_single_url_path_segment(name):
    try:
        RuleSpec(name=name, priority=1, action_type="send_email", risk_level="high")
    except RuleValidationError:
        return
    assert "/" not in name and name not in (".", "..") and name == name.strip()


def test_the_editor_refuses_a_slash_and_the_rule_list_keeps_working(client, people, admin_user):
    client.force_login(admin_user)
    response = client.post(
        "/rules/new/",
        {
            "rule_json": json.dumps({"name": "pay/wire", "priority": 5, "action_type": "pay_*", "risk_level": "high"}),
            "note": "try a slash",
        },
    )
    assert response.status_code in (400, 422)
    assert "is not a rule name" in response.content.decode()
    assert client.get("/rules/").status_code == 200
