"""Rules read as sentences on every rule page: the list, a version, a proposal. Seen
before: `eq True` in the list, `[{'path': 'params.amount', ...}]` and
`enabled True -> False` in a version's changes."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st

from approvals import policy
from approvals.models import PolicyVersion
from approvals.people import Person
from approvals.policy.tuning import history
from approvals.policy.tuning.proposal_review import condition_text

pytestmark = pytest.mark.django_db

BIG_IRREVERSIBLE = {
    "name": "big_irreversible",
    "priority": 6,
    "action_type": "pay_*",
    "risk_level": "high",
    "match": "any",
    "conditions": [
        {"path": "impact.reversible", "op": "eq", "value": False},
        {"path": "params.amount", "op": "gte", "value": 100},
    ],
}


@pytest.mark.parametrize(
    ("condition", "words"),
    [
        ({"path": "impact.reversible", "op": "eq", "value": True}, "impact.reversible is true"),
        ({"path": "impact.reversible", "op": "ne", "value": False}, "impact.reversible is not false"),
        ({"path": "params.memo", "op": "eq", "value": None}, "params.memo is null"),
        ({"path": "params.amount", "op": "eq", "value": 100}, "params.amount = 100"),
        ({"path": "params.amount", "op": "eq", "value": "100"}, 'params.amount = "100"'),
        ({"path": "params.amount", "op": "gte", "value": 5000}, "params.amount ≥ 5000"),
        ({"path": "params.to", "op": "in", "value": ["a@x.io", "b@x.io"]}, 'params.to is one of "a@x.io", "b@x.io"'),
        ({"path": "params.subject", "op": "matches", "value": "^URGENT"}, "params.subject matches /^URGENT/"),
        ({"path": "params.to", "op": "len_gt", "value": 3}, "params.to is longer than 3"),
        ({"path": "params.to", "op": "exists", "value": False}, "params.to does not exist"),
    ],
)
def test_each_operator_reads_as_words(condition, words):
    assert condition_text(condition) == words


@given(
    st.dictionaries(
        st.sampled_from(["path", "op", "value"]),
        st.none() | st.booleans() | st.text(max_size=8) | st.lists(st.integers(), max_size=3),
    )
)
def test_a_malformed_condition_is_shown_not_a_crash(condition):
    assert isinstance(condition_text(condition), str)


def test_the_rule_list_shows_conditions_in_words_joined_the_way_they_combine(admin_client, risk_admin):
    policy.save_rule(BIG_IRREVERSIBLE, actor=Person(risk_admin), note="big or irreversible payments")
    page = admin_client.get(reverse("rules:list")).content.decode()
    row = page[page.index('data-rule="big_irreversible"') :]
    row = row[: row.index("</tr>")]
    assert (
        '<span class="condition"><code>impact.reversible is false</code></span>'
        '<span class="condition"><span class="joiner">or</span> <code>params.amount ≥ 100</code></span>'
    ) in row
    assert "eq" not in row.replace("required", "")  # no operator names: 'eq False' read as code


def test_a_versions_changes_are_side_by_side_in_words(admin_client, risk_admin):
    policy.save_rule(BIG_IRREVERSIBLE, actor=Person(risk_admin), note="add")
    policy.save_rule(
        {**BIG_IRREVERSIBLE, "enabled": False, "conditions": [{"path": "params.amount", "op": "gte", "value": 500}]},
        actor=Person(risk_admin),
        note="only big ones, and off for now",
    )
    version = PolicyVersion.objects.latest()
    page = admin_client.get(reverse("rules:version", args=[version.number])).content.decode()
    changes = page[page.index('id="version-changes"') : page.index("<h2>Rules</h2>")]
    assert '<th scope="row">Enabled</th><td class="before">yes</td><td class="after">no</td>' in changes
    assert '<li class="condition-removed" title="removed"><code>impact.reversible is false</code></li>' in changes
    assert '<li class="condition-added" title="added"><code>params.amount ≥ 500</code></li>' in changes
    for raw in ("True", "False", "{&#x27;", "[{", "&#x27;path&#x27;"):
        assert raw not in changes
    rules = page[page.index("<h2>Rules</h2>") :]
    assert "params.amount ≥ 500" in rules and "[{" not in rules


def test_the_history_lines_read_as_words(risk_admin):
    policy.save_rule(BIG_IRREVERSIBLE, actor=Person(risk_admin), note="add")
    policy.save_rule({**BIG_IRREVERSIBLE, "enabled": False}, actor=Person(risk_admin), note="off")
    (line,) = history.rows(history.versions()[:1])[0].lines
    assert line == "big_irreversible: enabled yes → no"
    policy.save_rule(
        {**BIG_IRREVERSIBLE, "enabled": False, "conditions": BIG_IRREVERSIBLE["conditions"][1:]},
        actor=Person(risk_admin),
        note="drop one",
    )
    (line,) = history.rows(history.versions()[:1])[0].lines
    assert line == (
        "big_irreversible: conditions impact.reversible is false; params.amount ≥ 100 → params.amount ≥ 100"
    )


def test_the_version_page_reads_in_bounded_queries(admin_client, risk_admin, django_assert_max_num_queries):
    for amount in (100, 200, 300):
        policy.save_rule(
            {**BIG_IRREVERSIBLE, "conditions": [{"path": "params.amount", "op": "gte", "value": amount}]},
            actor=Person(risk_admin),
            note=json.dumps(amount),
        )
    with django_assert_max_num_queries(10):
        assert admin_client.get(reverse("rules:version", args=[2])).status_code == 200
