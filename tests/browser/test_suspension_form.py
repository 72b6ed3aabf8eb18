"""A suspension's answer form in a real browser (Debian chromium against daphne): the
fields generated from the step's resume schema produce exactly the object the host
resumes with; a schema the fields cannot express falls back to a JSON editor checked
live, which refuses a violating answer in the browser, as the server refuses it raw."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from hypothesis import HealthCheck, given, settings

from agents.services import issue_token
from approvals.models import ApprovalRequest
from audit.models import AuditEvent
from tests.browser.conftest import select_card
from tests.suspensions.strategies import SIMPLE, answers, server_accepts

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FORM_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "Pay the <b>invoice</b>?"},
        "limit": {"type": "number", "default": 150.13},
        "count": {"type": "integer"},
        "channel": {"enum": ["email", "sms"], "title": "Channel"},
        "note": {"type": "string", "description": "Why, for the record"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "contact": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "urgent": {"type": "boolean"}},
            "required": ["name"],
        },
    },
    "required": ["approved", "channel", "contact"],
    "additionalProperties": False,
}
# `additionalProperties` as a schema: no generated fields can express it, so a JSON editor.
EDITOR_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
    "additionalProperties": {"type": "string"},
}
HOSTILE = "<img src=x onerror=alert(document.cookie)>"


def call(server_url: str, method: str, path: str, body: dict | None = None, headers: dict | None = None):
    request = urllib.request.Request(
        server_url + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


@pytest.fixture
def agent_call(agent, daphne_server):
    token = issue_token(agent, label="suspension browser test").secret

    def _call(method: str, path: str, body: dict | None = None):
        return call(daphne_server.url, method, path, body, {"Authorization": f"Bearer {token}"})

    return _call


def suspend(agent_call, schema: dict, key: str) -> str:
    status, body = agent_call(
        "POST",
        "/api/v1/suspensions/",
        {
            "title": f"Approve the payment {HOSTILE}",
            "summary": f"**Over the limit.** <script>alert(1)</script> {HOSTILE}",
            "workflow_id": "approval-flow",
            "step_id": "approval",
            "idempotency_key": key,
            "suspend_payload": {"amount": 150.13, "reason": HOSTILE},
            "resume_schema": schema,
        },
    )
    assert status == 201, body
    return body["id"]


def console_errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def test_the_generated_form_produces_exactly_the_object_the_host_resumes_with(
    logged_in_page, people, agent_call, daphne_server
):
    request_id = suspend(agent_call, FORM_SCHEMA, "form-1")
    alice = logged_in_page("alice", "alice-pw-123!")
    errors = console_errors(alice)
    alice.reload()
    select_card(alice, request_id)
    form = alice.locator(f"#card-{request_id} form.respond-form")
    form.wait_for()
    form.locator(".sf-field").first.wait_for()  # the script built the fields

    assert form.locator("textarea[name=resume_data]").is_hidden()
    assert form.get_by_label("limit").input_value() == "150.13"  # the schema's default
    assert form.get_by_text("Pay the <b>invoice</b>?").is_visible()  # help text, as text
    form.get_by_label("approved").check()
    form.get_by_label("count").fill("3")
    form.get_by_label("Channel").select_option(label="sms")
    form.get_by_label("note").fill("Zoë said <b>yes</b> ✓")
    form.locator(".sf-array .sf-add").click()
    form.locator(".sf-array .sf-add").click()
    items = form.locator(".sf-array .sf-items input")
    items.nth(0).fill("urgent")
    items.nth(1).fill("q4")
    form.locator("fieldset.sf-object").get_by_label("name").fill("Dana")
    form.locator("button[type=submit]").click()
    alice.locator(f"#card-{request_id}").wait_for(state="detached")

    expected = {
        "approved": True,
        "limit": 150.13,
        "count": 3,
        "channel": "sms",
        "note": "Zoë said <b>yes</b> ✓",
        "tags": ["urgent", "q4"],
        "contact": {"name": "Dana", "urgent": False},
    }
    status, resumed = agent_call("GET", f"/api/v1/requests/{request_id}/resume/")
    assert (status, resumed["state"]) == (200, "approved")
    assert resumed["resume_data"] == expected
    assert list(resumed["resume_data"]) == list(expected)
    assert alice.dialogs == []  # nothing the agent wrote ran as script
    assert errors == []


def test_a_violating_answer_is_refused_in_the_browser_and_by_the_server(
    logged_in_page, people, agent_call, daphne_server, require_redis
):
    request_id = suspend(agent_call, EDITOR_SCHEMA, "editor-1")
    alice = logged_in_page("alice", "alice-pw-123!")
    alice.reload()
    select_card(alice, request_id)
    form = alice.locator(f"#card-{request_id} form.respond-form")
    editor = form.locator("textarea[name=resume_data]")
    editor.wait_for()
    assert form.locator(".sf-field").count() == 0  # a JSON editor, not fields

    editor.fill('{"approved": "yes", "extra": 1}')
    problems = form.locator("[data-schema-errors]")
    problems.get_by_text("/approved: Expected boolean.").wait_for()
    assert "/extra: Expected string." in problems.inner_text()
    form.locator("button[type=submit]").click()
    assert problems.is_visible()
    editor.fill("{not json")
    problems.get_by_text("Not JSON", exact=False).wait_for()
    form.locator("button[type=submit]").click()

    # Nothing reached the server: still pending, nobody answered.
    assert ApprovalRequest.objects.get(pk=request_id).resume_data_json == ""
    assert not AuditEvent.objects.filter(request_id=request_id, verb="suspension.answered").exists()

    # The same answer sent raw, past the browser's check, is the server's to refuse.
    raw = alice.evaluate(
        """async (url) => {
        const token = document.cookie.split("; ").find((c) => c.startsWith("csrftoken=")).split("=")[1];
        const response = await fetch(url, {method: "POST", credentials: "same-origin",
            headers: {"Content-Type": "application/json", "X-CSRFToken": token},
            body: JSON.stringify({decision: "respond", revision: 1, resume_data: {approved: "yes", extra: 1}})});
        return [response.status, await response.json()];
    }""",
        f"/api/v1/requests/{request_id}/decisions/",
    )
    assert raw[0] == 422 and raw[1]["code"] == "invalid_resume_data"
    assert raw[1]["details"]["path"] in ("/approved", "/extra")

    editor.fill('{"approved": false, "why": "over budget"}')
    form.locator("button[type=submit]").click()
    alice.locator(f"#card-{request_id}").wait_for(state="detached")
    status, resumed = agent_call("GET", f"/api/v1/requests/{request_id}/resume/")
    assert resumed["resume_data"] == {"approved": False, "why": "over budget"}


# The browser's live check and the server's agree on every answer, for a schema within
# the browser's subset (no `pattern`: the browser leaves patterns to the server's RE2).
SUBSET = {key: value for key, value in SIMPLE.items() if key != "patternProperties"}
SUBSET["properties"] = {
    key: ({k: v for k, v in value.items() if k != "pattern"} if key == "code" else value)
    for key, value in SUBSET["properties"].items()
}


@pytest.fixture(scope="module")
def validator_page(browser, daphne_server):
    context = browser.new_context(base_url=daphne_server.url)
    page = context.new_page()
    page.goto("/login/")
    page.evaluate("import('/static/js/schema_form.js').then((m) => { window.schemaValidate = m.validate; })")
    page.wait_for_function("() => window.schemaValidate !== undefined")
    yield page
    context.close()


@pytest.mark.django_db
def test_the_browsers_check_agrees_with_the_servers_on_any_answer(validator_page):
    @settings(
        max_examples=300,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(answer=answers)
    def agree(answer):
        in_browser = validator_page.evaluate("([s, v]) => window.schemaValidate(s, v)", [SUBSET, answer])
        assert (in_browser == []) == server_accepts(SUBSET, answer), (answer, in_browser)

    agree()
