"""Masked means masked in the rule tester and dry-runs (DESIGN.md; issue 22, item 4).

A risk-admin's rule tester used to hand a masked value back in `conditions[].actual` when the
probe rule masked nothing, and its `matches` answered guesses about the rest, on any request,
decided or not, unaudited. Now which params are masked comes from the request's own
classification, a probe that reads one by value needs reveal permission on that request (and
is audited), and dry-runs read masked values blind; a blind test answers the same whatever the
masked value is.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from approvals import policy, services
from approvals.masking import MASK
from approvals.people import Person
from approvals.policy.rules.impact import compute_impact
from approvals.policy.tuning import editing
from audit.models import AuditEvent

from .masking_canary import PROBE, _client, _post_json, _probe_reveals

pytestmark = pytest.mark.django_db


def test_a_probe_on_a_masked_param_is_refused_to_a_risk_admin_and_nothing_is_revealed(seeded, canary, risk_admin):
    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": PROBE, "request_id": str(seeded.pk)})

    assert response.status_code == 403
    assert response.json()["code"] == "masked_probe_refused"
    assert response.json()["details"]["fields"] == ["params.body"]
    canary.assert_absent("the refused probe", response.content.decode())
    assert "matches" not in response.json() and "rule_matches" not in response.json()  # no oracle either
    assert _probe_reveals(seeded) == 0


@pytest.mark.parametrize(
    "condition",
    [
        {"path": "params.body", "op": "eq", "value": "x"},
        {"path": "params.body", "op": "contains", "value": "canary"},
        {"path": "params.body", "op": "len_gt", "value": 3},
        {"path": "params.body", "op": "in", "value": ["a", "b"]},
        {"path": "params.amount", "op": "gt", "value": 5},
        {"path": "impact.amount", "op": "gte", "value": 1},  # the amount fact copies the masked amount
    ],
)
def test_every_operator_that_could_be_an_oracle_is_refused(seeded, risk_admin, condition):
    probe = {**PROBE, "conditions": [condition]}
    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": probe, "request_id": str(seeded.pk)})
    assert response.status_code == 403 and response.json()["code"] == "masked_probe_refused"


def test_a_probe_that_masks_the_param_itself_is_refused_too(seeded, risk_admin):
    """The request's classification decides what is masked, not the probe's own list."""
    probe = {**PROBE, "masked_params": ["body"]}
    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": probe, "request_id": str(seeded.pk)})
    assert response.status_code == 403 and response.json()["code"] == "masked_probe_refused"


def test_a_probe_on_a_decided_request_is_refused_even_to_a_decider(seeded, canary, risk_admin, people):
    risk_admin.groups.add(Group.objects.get(name="reviewers"))  # ada may decide it...
    services.reject(seeded.pk, actor=Person(people["alice"]), feedback="no", revision=1)  # ...but it is decided

    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": PROBE, "request_id": str(seeded.pk)})

    assert response.status_code == 403 and response.json()["code"] == "masked_probe_refused"
    canary.assert_absent("the refused probe", response.content.decode())
    assert _probe_reveals(seeded) == 0


def test_a_tester_who_may_reveal_gets_the_probe_and_it_is_audited_naming_the_field(seeded, canary, risk_admin):
    risk_admin.groups.add(Group.objects.get(name="reviewers"))  # ada may decide the pending request

    probe = {**PROBE, "conditions": [{"path": "params.body", "op": "matches", "value": "^canary[0-9a-f]+$"}]}
    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": probe, "request_id": str(seeded.pk)})

    assert response.status_code == 200
    result = response.json()
    assert result["conditions"][0]["held"] is True  # the real value was read (the mask would not match)
    assert result["rule_matches"] is True and result["read_blind"] == []
    assert result["conditions"][0]["actual"] == MASK  # still shown only as masked
    canary.assert_absent("the permitted probe", response.content.decode())
    event = AuditEvent.objects.get(request_id=seeded.pk, verb="rules.masked_probe")
    assert event.actor_label == "ada"
    assert event.metadata["fields"] == ["params.body"]
    canary.assert_absent("the probe's audit event", json.dumps(event.metadata))


def test_without_a_probe_on_a_masked_path_the_tester_reads_masked_values_blind(seeded, canary, risk_admin):
    """The rest of the policy (including a rule that admin applied at once, stricter
    ones need no second pair of eyes) reads the masked body as the mask: the answer is
    the same whatever the body says."""
    policy.save_rule(
        {
            "name": "stricter_oracle",
            "priority": 0,
            "action_type": "send_email",
            "risk_level": "prohibited",
            "masked_params": [],
            "conditions": [{"path": "params.body", "op": "contains", "value": canary.text[:10]}],
        },
        actor=Person(risk_admin),
        note="a stricter rule applies at once",
    )
    innocent = {**PROBE, "conditions": [{"path": "params.subject", "op": "eq", "value": "Quarterly"}]}

    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": innocent, "request_id": str(seeded.pk)})

    assert response.status_code == 200
    result = response.json()
    assert result["conditions"][0]["held"] is True  # unmasked params are read as they are
    assert result["classification"]["risk_level"] != "prohibited"  # the oracle rule read the mask, not the body
    assert "params.body" in result["read_blind"]
    assert result["impact"]["amount"] == MASK
    canary.assert_absent("the blind test", response.content.decode())
    assert _probe_reveals(seeded) == 0


def test_a_dry_run_over_real_requests_is_no_oracle_for_a_masked_value(seeded, canary, risk_admin):
    """The same report whether the guess is right or wrong."""

    def report(guess: str) -> dict:
        rule = {
            "name": "guess",
            "priority": 0,
            "action_type": "send_email",
            "risk_level": "critical",
            "conditions": [{"path": "params.body", "op": "eq", "value": guess}],
        }
        response = _post_json(_client(risk_admin), reverse("rules:dry-run"), {"rule": rule})
        assert response.status_code == 200
        canary.assert_absent("the dry-run", response.content.decode())
        return {key: value for key, value in response.json().items() if key not in ("window_start", "window_end")}

    assert report(canary.text) == report("wrong guess")


def test_an_edit_refused_by_policy_names_no_masked_value(seeded, canary, risk_admin, people):
    """A prohibited rule (applied at once: it is stricter) that reads the masked body:
    the refusal explains itself with the body masked."""
    policy.save_rule(
        {
            "name": "no_quarterly",
            "priority": 0,
            "action_type": "send_email",
            "risk_level": "prohibited",
            "masked_params": [],
            "match": "all",
            "conditions": [
                {"path": "params.subject", "op": "eq", "value": "Refused"},
                {"path": "params.body", "op": "contains", "value": "canary"},
            ],
        },
        actor=Person(risk_admin),
        note="stricter",
    )
    client = APIClient()
    client.force_login(people["alice"])
    response = client.post(
        f"/api/v1/requests/{seeded.pk}/decisions/",
        {"decision": "approve", "revision": 1, "edits": {"subject": "Refused"}},
        format="json",
    )

    assert response.status_code == 422 and response.json()["code"] == "edit_prohibited"
    assert MASK in response.json()["message"]
    canary.assert_absent("the edit refusal", response.content.decode())


_VALUES = st.one_of(st.text(max_size=30), st.integers(), st.lists(st.text(max_size=5), max_size=3), st.booleans())
_CONDITIONS = st.sampled_from(
    [
        {"path": "params.body", "op": "matches", "value": "^a"},
        {"path": "params.body", "op": "eq", "value": "a"},
        {"path": "params.body", "op": "len_gt", "value": 4},
        {"path": "params.body", "op": "contains", "value": "a"},
        {"path": "params.body", "op": "gt", "value": 10},
        {"path": "params.body", "op": "in", "value": ["a", 1]},
        {"path": "impact.amount", "op": "gt", "value": 10},
    ]
)


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=_VALUES, second=_VALUES, condition=_CONDITIONS)
def test_a_blind_rule_test_answers_the_same_whatever_the_masked_value(masked_rule, first, second, condition):
    """The tester's blind evaluation (what anyone without reveal permission gets) is
    a function of what they may see: two requests differing only in a masked value get
    the same answer, explanation and impact included."""
    rule = {**PROBE, "conditions": [condition]}

    def answer(body, amount):
        sample = {"action_type": "send_email", "params": {"to": ["a@example.com"], "body": body, "amount": amount}}
        return editing.try_rule(rule, sample, masked={"body", "amount"}).to_dict()

    # Coarse facts a fixed detector reads off the whole call (sensitive data found or
    # not) are what reviewers decide on and may differ; hold them equal.
    assume(_coarse(first) == _coarse(second))
    assert answer(first, 5) == answer(second, 7)


def _coarse(body) -> tuple:
    impact = compute_impact("send_email", {"to": ["a@example.com"], "body": body})
    return impact["sensitive"], tuple(impact["sensitive_kinds"]), tuple(impact["unknown"])


def test_the_amount_fact_is_masked_only_where_it_may_copy_a_masked_param(risk_admin, submit, people):
    """A payment whose memo is masked still shows its amount (and may be tested on it);
    one whose amount is masked shows neither."""
    for name, masked in (("memo_masked", ["memo"]), ("amount_masked", ["amount"])):
        policy.save_rule(
            {
                "name": name,
                "priority": 1,
                "action_type": f"pay_{name}",
                "risk_level": "high",
                "masked_params": masked,
                "conditions": [],
            },
            actor=Person(risk_admin),
            note="masks",
        )
    memo = submit("pay_memo_masked", {"amount": 1234, "memo": "secret memo"})
    amount = submit("pay_amount_masked", {"amount": 98765, "memo": "visible memo"})
    alice = APIClient()
    alice.force_login(people["alice"])

    assert alice.get(f"/api/v1/requests/{memo.pk}/").json()["impact"]["amount"] == "1234"
    assert alice.get(f"/api/v1/requests/{amount.pk}/").json()["impact"]["amount"] == MASK
    probe = {**PROBE, "action_type": "pay_*", "conditions": [{"path": "impact.amount", "op": "gt", "value": 1000}]}
    allowed = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": probe, "request_id": str(memo.pk)})
    assert allowed.status_code == 200 and allowed.json()["conditions"][0]["held"] is True
    refused = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": probe, "request_id": str(amount.pk)})
    assert refused.status_code == 403 and refused.json()["code"] == "masked_probe_refused"
    assert "98765" not in refused.content.decode()
