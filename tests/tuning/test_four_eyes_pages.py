"""Four eyes on the rules pages: the editor says whether a save applied or waits and
why; the proposal page shows the change in words and lets only a second risk-admin
approve; JSON answers carry a code; the admin goes through the same service.

ada and ben are risk-admins; alice reviews.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from approvals import policy
from approvals.models import PolicyProposal, PolicyVersion, RiskRule
from approvals.people import Person

from .conftest import WIRE_TRANSFER

pytestmark = pytest.mark.django_db

TO_REVIEWERS = {**WIRE_TRANSFER, "approver_group": "reviewers"}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def save_in_editor(client: Client, rule: dict, note: str):
    return client.post(
        reverse("rules:edit", args=[rule["name"]]), {"rule_json": json.dumps(rule), "note": note}, follow=True
    )


def flash(response) -> str:
    return " ".join(str(m) for m in response.context["messages"])


def test_a_waiting_save_says_why_and_opens_the_proposal(risk_admin, wire_rule, four_eyes):
    response = save_in_editor(signed_in(risk_admin), TO_REVIEWERS, "Reviewers can do wires")

    proposal = PolicyProposal.objects.get()
    assert response.redirect_chain[-1][0] == reverse("rules:proposal", args=[proposal.pk])
    assert flash(response) == (
        "Rule wire_transfer: Waiting for a second risk-admin: changing the approver group "
        "of wire_transfer needs a second risk-admin."
    )
    body = response.content.decode()
    assert "Proposed by <strong>ada</strong>" in body and "Reviewers can do wires" in body
    # ada proposed it: she may withdraw, not approve.
    assert 'id="withdraw"' in body and 'id="approve"' not in body and 'id="reject"' not in body
    assert RiskRule.objects.get(name="wire_transfer").approver_group.name == "treasury"


def test_a_stricter_save_says_it_applied_as_which_version(risk_admin, wire_rule, four_eyes):
    response = save_in_editor(signed_in(risk_admin), {**WIRE_TRANSFER, "risk_level": "critical"}, "Wires are risky")
    newest = PolicyVersion.objects.latest()
    assert response.redirect_chain[-1][0] == reverse("rules:list")
    assert flash(response) == f"Rule wire_transfer: Applied as version {newest.number} (stricter only)."


def test_the_proposal_page_shows_rules_and_conditions_side_by_side_in_words(risk_admin, ben, wire_rule, four_eyes):
    proposal = policy.save_rule(
        {
            **TO_REVIEWERS,
            "conditions": [
                {"path": "params.amount", "op": "gte", "value": 5000},
                {"path": "params.to", "op": "exists", "value": True},
            ],
        },
        actor=Person(risk_admin),
        note="Only big wires, to reviewers",
    )

    body = signed_in(ben).get(reverse("rules:proposal", args=[proposal.pk])).content.decode()

    assert '<th scope="row">Approver group</th><td class="before">treasury</td><td class="after">reviewers</td>' in body
    # Conditions one per line, side by side: what only one side has is marked.
    assert '<li class="condition-removed" title="removed"><code>params.amount &gt; 1000</code></li>' in body
    assert (
        '<li class="condition-added" title="added"><code>params.amount ≥ 5000</code></li>'
        '<li class="condition-added" title="added"><span class="joiner">and</span> <code>params.to exists</code></li>'
    ) in body
    assert "{&#x27;path&#x27;" not in body and "[{" not in body  # never a Python or JSON repr
    assert "It waits because changing the conditions of wire_transfer needs a second risk-admin." in body
    assert proposal.dry_run["summary"] in body
    assert 'id="approve"' in body and 'id="reject"' in body and 'id="withdraw"' not in body


def test_ben_approves_on_the_page_and_history_names_both(risk_admin, ben, wire_rule, four_eyes):
    proposal = policy.save_rule(TO_REVIEWERS, actor=Person(risk_admin), note="Reviewers can do wires")
    client = signed_in(ben)

    response = client.post(reverse("rules:proposal-approve", args=[proposal.pk]), {"note": "ok"}, follow=True)

    version = PolicyVersion.objects.latest()
    assert flash(response) == f"Approved: applied as version {version.number}."
    assert (version.created_by_label, version.approved_by_label) == ("ada", "ben")
    history = client.get(reverse("rules:history")).content.decode()
    assert '<td class="approved-by">ben</td>' in history
    assert f"v{version.number}" in client.get(reverse("rules:version", args=[version.number])).content.decode()


def test_the_list_shows_pending_proposals_first_in_bounded_queries(
    risk_admin, ben, wire_rule, four_eyes, django_assert_max_num_queries
):
    for level in ("medium", "low", "critical"):
        policy.save_rule(
            {**WIRE_TRANSFER, "risk_level": level, "approver_group": "reviewers"},
            actor=Person(risk_admin),
            note=f"wires {level}",
        )
    client = signed_in(ben)
    with django_assert_max_num_queries(12):
        body = client.get(reverse("rules:list")).content.decode()
    assert body.count("Proposal ") == 3
    assert body.index("Waiting for a second risk-admin") < body.index('id="rules-table"')
    assert body.index("wires medium") < body.index("wires critical")  # oldest first


def test_json_refusals_carry_a_code_and_never_a_500(risk_admin, ben, people, wire_rule, four_eyes):
    proposal = policy.save_rule(TO_REVIEWERS, actor=Person(risk_admin), note="x")
    approve = reverse("rules:proposal-approve", args=[proposal.pk])
    reject = reverse("rules:proposal-reject", args=[proposal.pk])

    def post(user, url, data=None):
        response = signed_in(user).post(url, data or {}, HTTP_ACCEPT="application/json")
        return response.status_code, response.json()["code"] if response.status_code >= 400 else response.json()

    assert post(risk_admin, approve) == (403, "four_eyes_same_person")
    assert post(people["alice"], approve) == (403, "not_permitted")
    assert post(ben, reverse("rules:proposal-approve", args=[proposal.pk + 999])) == (404, "not_found")
    assert post(ben, reject) == (422, "invalid_rule")  # a rejection says why
    status, body = post(ben, approve)
    assert status == 200 and body["ok"] and body["version"] == PolicyVersion.objects.latest().number
    assert post(ben, approve) == (409, "proposal_not_pending")
    assert post(risk_admin, reject) == (409, "proposal_not_pending")


def test_a_stale_proposal_is_refused_on_the_page(risk_admin, ben, wire_rule, four_eyes):
    proposal = policy.save_rule(TO_REVIEWERS, actor=Person(risk_admin), note="x")
    policy.save_rule({**WIRE_TRANSFER, "required_approvals": 2}, actor=Person(ben), note="Two for wires")
    client = signed_in(ben)
    assert "approving would apply nothing" in client.get(reverse("rules:proposal", args=[proposal.pk])).content.decode()
    response = client.post(reverse("rules:proposal-approve", args=[proposal.pk]), HTTP_ACCEPT="application/json")
    assert (response.status_code, response.json()["code"]) == (409, "proposal_stale")


def test_the_verb_list_form(risk_admin, four_eyes):
    client = signed_in(risk_admin)
    current = list(policy.current_policy().destructive_verbs)
    assert "\n".join(current) in client.get(reverse("rules:list")).content.decode()

    added = client.post(
        reverse("rules:destructive-verbs"),
        {"verbs": "\n".join([*current, "  Shred  ", ""]), "note": "Shredding destroys"},
        follow=True,
    )
    assert (
        flash(added) == f"Destructive verbs: Applied as version {PolicyVersion.objects.latest().number} "
        "(stricter only)."
    )
    assert policy.current_policy().destructive_verbs[-1] == "shred"

    removed = client.post(reverse("rules:destructive-verbs"), {"verbs": "delete", "note": "Fewer"}, follow=True)
    assert "Waiting for a second risk-admin: removing the destructive verb" in flash(removed)
    assert "shred" in policy.current_policy().destructive_verbs

    refused = client.post(reverse("rules:destructive-verbs"), {"verbs": "delete\nread and", "note": "x"}, follow=True)
    assert "destructive_verbs[1]" in flash(refused)


def test_the_editor_has_a_step_up_box_and_the_dry_run_says_whether_saving_waits(risk_admin, wire_rule, four_eyes):
    client = signed_in(risk_admin)
    assert 'id="f-step_up"' in client.get(reverse("rules:edit", args=["wire_transfer"])).content.decode()

    def verdict(rule):
        response = client.post(
            reverse("rules:dry-run"),
            data=json.dumps({"rule": rule}),
            content_type="application/json",
            HTTP_ACCEPT="application/json",
        )
        return response.json()["four_eyes"]

    assert verdict({**WIRE_TRANSFER, "step_up": True}) == {"on": True, "waits_because": None}
    assert verdict(TO_REVIEWERS)["waits_because"] == (
        "changing the approver group of wire_transfer needs a second risk-admin"
    )


def test_forged_posts_without_a_csrf_token_are_refused(risk_admin, ben, wire_rule, four_eyes):
    proposal = policy.save_rule(TO_REVIEWERS, actor=Person(risk_admin), note="x")
    client = Client(enforce_csrf_checks=True)
    client.force_login(ben)
    for url, data in {
        reverse("rules:proposal-approve", args=[proposal.pk]): {},
        reverse("rules:proposal-reject", args=[proposal.pk]): {"note": "forged"},
        reverse("rules:destructive-verbs"): {"verbs": "", "note": "forged"},
    }.items():
        assert client.post(url, data).status_code == 403, url
    assert PolicyProposal.objects.get(pk=proposal.pk).status == "pending"


def test_the_admin_goes_through_four_eyes_too(risk_admin, wire_rule, four_eyes):
    """ada edits the rule's group straight in the Django admin: it waits, like the editor."""
    rule = RiskRule.objects.get(name="wire_transfer")
    form = {
        "name": "wire_transfer",
        "priority": 5,
        "enabled": "on",
        "action_type": "wire_transfer",
        "conditions": json.dumps(WIRE_TRANSFER["conditions"]),
        "match": "all",
        "risk_level": "high",
        "required_approvals": 1,
        "approver_group": Group.objects.get(name="reviewers").pk,
        "decision_ttl_seconds": 3600,
        "execution_window_seconds": 900,
        "editable_params": '["memo", "amount"]',
        "masked_params": "[]",
        "change_note": "Reviewers can do wires",
    }
    response = signed_in(risk_admin).post(f"/admin/approvals/riskrule/{rule.pk}/change/", form)

    proposal = PolicyProposal.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("rules:proposal", args=[proposal.pk])
    assert RiskRule.objects.get(name="wire_transfer").approver_group.name == "treasury"
    assert not LogEntry.objects.exists()

    alice = Client()
    alice.force_login(Group.objects.get(name="reviewers").user_set.get(username="alice"))
    assert alice.get(f"/admin/approvals/riskrule/{rule.pk}/change/").status_code in (302, 403)
