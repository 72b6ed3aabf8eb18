"""What the bounds stories share (tests/guards/test_bounds_*.py): the five shapes every whole
number is tried with at each edge (40 digits, a negative, a float, a bool and a string), the
hypothesis strategies over arbitrary numbers and text, ada the risk-admin, and the check that a
refusal names its field.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from approvals.bounds import BOUNDS
from approvals.permissions import RISK_ADMINS

FORTY_DIGITS = 10**40 - 1
HOSTILE = [
    pytest.param(FORTY_DIGITS, id="40-digits"),
    pytest.param(-(10**39), id="huge-negative"),
    pytest.param(-1, id="negative"),
    pytest.param(2.5, id="float"),
    pytest.param(3.0, id="whole-float"),
    pytest.param(True, id="bool"),
    pytest.param("5", id="string"),
    pytest.param(None, id="null"),
]
RULE_FIELDS = ["priority", "required_approvals", "decision_ttl_seconds", "execution_window_seconds"]
NOTIFICATION_FIELDS = ["remind_before_seconds", "escalate_after_seconds", "max_extension_seconds"]
RULE = {
    "name": "bounded_rule",
    "priority": 50,
    "action_type": "send_email",
    "risk_level": "high",
    "required_approvals": 1,
    "approver_group": "reviewers",
    "decision_ttl_seconds": 3600,
    "execution_window_seconds": 900,
    "editable_params": [],
    "masked_params": [],
    "conditions": [],
}
# Anything a JSON body or a form can carry where a number is expected.
ANY_NUMBER = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**45), max_value=10**45),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=50),
)  # NaN and Infinity are not JSON: test_a_number_json_cannot_hold_is_refused_not_a_500
ANY_TEXT = st.one_of(
    st.integers(min_value=-(10**45), max_value=10**45).map(str),
    st.text(max_size=50),
    st.sampled_from(["²", "١٢", "1e400", "nan", "-0", "0x10", " 5 ", "5.0", "true", "9" * 5000]),
)
HYPOTHESIS = hypothesis_settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@pytest.fixture
def ada(admin_user) -> Client:
    """ada, a risk-admin, signed in."""
    from django.contrib.auth.models import Group

    admin_user.groups.add(Group.objects.get(name=RISK_ADMINS))
    client = Client()
    client.force_login(admin_user)
    return client


def post_json(client: Client, name: str, body: dict, *args) -> object:
    return client.post(reverse(name, args=args), data=json.dumps(body), content_type="application/json")


def in_bounds(field: str, value: object) -> bool:
    return BOUNDS[field].problem(value) is None


def refused_at_the_input_edge(response, raw: object) -> bool:
    """A NUL or a lone surrogate: every field's 400 (controlplane.http.inputs), before any number is read."""
    if response.status_code != 400 or not isinstance(raw, str):
        return False
    assert "\x00" in raw or any(0xD800 <= ord(char) <= 0xDFFF for char in raw), (raw, response.content[:200])
    return True
