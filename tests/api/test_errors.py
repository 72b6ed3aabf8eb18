"""Every response under /api/ is JSON with a stable code and a message, errors included."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from freezegun import freeze_time
from rest_framework.test import APIClient

from agents.api.auth import consume_rate
from tests.api.conftest import EMAIL

pytestmark = pytest.mark.django_db


def _is_error(response, status: int, code: str) -> None:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert body["code"] == code and body["message"]


def test_unknown_urls_under_api_are_json_404(api):
    _is_error(api.get("/api/v1/nothing-here/"), 404, "not_found")
    _is_error(api.get("/api/v1/requests/not-a-uuid/"), 404, "not_found")


def test_unknown_urls_elsewhere_keep_the_html_page(client):
    response = client.get("/definitely-not-a-page/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")


def test_wrong_methods_are_json_405(api):
    _is_error(api.delete("/api/v1/actions/"), 405, "method_not_allowed")
    response = api.post("/api/v1/requests/00000000-0000-0000-0000-000000000000/resume/")
    _is_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, HEAD"


def test_oversized_bodies_are_json_413_never_500(api, settings):
    settings.API_MAX_BODY_BYTES = 100
    _is_error(
        api.post("/api/v1/actions/", {**EMAIL, "params": {"b": "x" * 200}}, format="json"), 413, "request_too_large"
    )


def test_django_body_limit_is_json_413_too(api, settings):
    """Past DATA_UPLOAD_MAX_MEMORY_SIZE, Django's own RequestDataTooBig also becomes a JSON 413."""
    settings.API_MAX_BODY_BYTES = 10_000_000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    _is_error(
        api.post("/api/v1/actions/", {**EMAIL, "params": {"b": "x" * 200}}, format="json"), 413, "request_too_large"
    )


def test_csrf_failures_for_reviewers_are_json_403(reviewer_client, api):
    request_id = api.post("/api/v1/actions/", EMAIL, format="json").json()["id"]
    response = reviewer_client("alice").post(
        f"/api/v1/requests/{request_id}/decisions/", {"decision": "approve"}, format="json"
    )
    _is_error(response, 403, "csrf_failed")


def test_the_csrf_failure_view_is_json_under_api_and_html_elsewhere(rf):
    from controlplane.http.errors import csrf_failure

    _is_error(csrf_failure(rf.post("/api/v1/x/"), "no token"), 403, "csrf_failed")
    assert not csrf_failure(rf.post("/login/"), "no token")["Content-Type"].startswith("application/json")


@pytest.fixture
def mid_window():
    """The clock halfway through the current rate window: a run that straddled a window
    boundary would see its count start again (and a fourth request pass)."""
    with freeze_time(datetime.fromtimestamp(time.time() // 60 * 60 + 30, tz=UTC)):
        yield


def test_rate_limit_is_429_with_retry_after(api, settings, agent, mid_window):
    settings.AGENT_TOKEN_RATE_LIMIT = (3, 60)
    statuses = [api.get("/api/v1/requests/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    response = api.get("/api/v1/requests/")
    _is_error(response, 429, "rate_limited")
    assert int(response["Retry-After"]) == 30
    # The long-poll counts against the same limit.
    _is_error(api.get("/api/v1/requests/00000000-0000-0000-0000-000000000000/resume/"), 429, "rate_limited")


def test_the_rate_counter_is_atomic_across_threads(agent, settings, mid_window):
    """Many concurrent increments never let more than the limit through."""
    import threading

    from agents.services import issue_token

    settings.AGENT_TOKEN_RATE_LIMIT = (50, 60)
    token = issue_token(agent).token
    allowed: list[bool] = []

    def hit() -> None:
        for _ in range(20):
            allowed.append(consume_rate(token) is None)

    threads = [threading.Thread(target=hit) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert allowed.count(True) == 50


def test_unsupported_media_type_is_json_415(api):
    _is_error(api.post("/api/v1/actions/", "a=b", content_type="text/plain"), 415, "unsupported_media_type")


def test_server_errors_under_api_are_json(rf):
    from controlplane.http.errors import server_error

    _is_error(server_error(rf.get("/api/v1/requests/")), 500, "server_error")


def test_a_domain_error_keeps_its_code_and_status(api):
    response = APIClient().get("/api/v1/requests/")
    _is_error(response, 401, "not_authenticated")
