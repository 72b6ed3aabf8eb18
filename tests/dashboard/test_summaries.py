"""The queue's summary line (approvals/web/summaries.py): the agent's reason first, as its
own words; else the first per-action-type template whose names resolve, over the masked
params; an admin's setting replaces the built-in templates."""

from __future__ import annotations

from types import SimpleNamespace

from approvals.masking import MASK
from approvals.web.summaries import Summary, summarize


def request(action_type: str = "send_email", reason: str = ""):
    return SimpleNamespace(action_type=action_type, reason=reason)


def test_the_agents_reason_comes_first_one_clipped_line_marked_as_its_own():
    found = summarize(request(reason="  Because\nthe customer asked  "), {"subject": "Hi"}, {})
    assert found == Summary("Because", agents_own=True)
    long = summarize(request(reason="y" * 500), {}, {})
    assert long is not None and len(long.text) == 140 and long.text.endswith("…")


def test_send_email_names_its_subject_and_recipient_count_and_falls_back_when_one_is_missing():
    assert summarize(request(), {"subject": "Hi"}, {"recipient_count": 3}).text == "“Hi” to 3 recipient(s)"
    assert summarize(request(), {"subject": "Hi"}, {}).text == "“Hi”"
    assert summarize(request(), {"subject": ""}, {"recipient_count": 2}).text == "To 2 recipient(s)"
    assert summarize(request(), {}, {}) is None
    assert summarize(request("unheard_of"), {"a": 1}, {}) is None


def test_a_masked_param_shows_masked_and_the_agents_values_are_not_templates():
    assert summarize(request(), {"subject": MASK}, {"recipient_count": 1}).text == f"“{MASK}” to 1 recipient(s)"
    assert summarize(request(), {"subject": "{params[x]} {0}"}, {}).text == "“{params[x]} {0}”"


def test_an_admins_setting_replaces_the_built_in_templates(settings):
    settings.REQUEST_SUMMARY_TEMPLATES = {"send_email": "Mail: {params[subject]}", "deploy": ["{params[env]}"]}
    assert summarize(request(), {"subject": "Hi"}, {}).text == "Mail: Hi"
    assert summarize(request("deploy"), {"env": "prod"}, {}).text == "prod"
    settings.REQUEST_SUMMARY_TEMPLATES = {"send_email": "{params.__class__}"}  # a broken one shows nothing
    assert summarize(request(), {"subject": "Hi"}, {}) is None


def test_history_takes_a_bad_date_or_outcome_as_matching_nothing_not_an_error(db, login_as, people):
    client = login_as(people["alice"])
    for query in ("decided_from=yesterday", "outcome=pending_approval", "decided_to=2026-13-45", "decided_by=%27--"):
        response = client.get(f"/history/?{query}")
        assert response.status_code == 200, query
        assert b"decided request" in response.content
