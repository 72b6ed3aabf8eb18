"""The site shell: sign in, sign out, navigation by group, CSP, static files.

Throttling of failed sign-ins is in test_sign_in_throttling.py."""

from __future__ import annotations

import pytest
from csp.middleware import CSPMiddleware
from django.contrib.auth.models import Group
from django.http import HttpResponse
from django.template import engines
from django.test import Client
from django.urls import reverse

from approvals.permissions import AUDITORS, RISK_ADMINS

from .conftest import PASSWORDS

LOGIN = reverse("login")


def sign_in(client: Client, username: str, password: str, **extra):
    return client.post(LOGIN, {"login": username, "password": password}, **extra)


def test_signing_in_through_the_form_lands_on_the_queue(browser_client, people):
    page = browser_client.get(LOGIN)
    assert page.status_code == 200 and "csrfmiddlewaretoken" in page.content.decode()
    token = browser_client.cookies["csrftoken"].value
    response = browser_client.post(
        LOGIN, {"login": "alice", "password": PASSWORDS["alice"], "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert browser_client.get("/").status_code == 200


def test_signing_out_is_a_post(client, people):
    client.force_login(people["alice"])
    assert client.get(reverse("logout")).status_code == 405
    response = client.post(reverse("logout"))
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert client.get("/").status_code == 302


@pytest.mark.parametrize(
    ("groups", "links"),
    [
        (["reviewers"], ["Queue", "History"]),
        ([RISK_ADMINS], ["Rules"]),
        ([AUDITORS], ["Audit log"]),
        (["reviewers", AUDITORS], ["Queue", "History", "Audit log"]),
    ],
)
def test_the_navigation_shows_what_each_group_opens(client, django_user_model, groups, links):
    user = django_user_model.objects.create_user("pat", password="pat-pw-123!")
    user.groups.add(*Group.objects.filter(name__in=groups))
    client.force_login(user)
    response = client.get(reverse("approvals:history"))
    shown = [link.label for link in response.context["nav_links"]]
    assert shown == links


def test_pages_carry_a_strict_content_security_policy(client, people):
    client.force_login(people["alice"])
    policy = client.get("/")["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["connect-src"] == "'self'"
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_a_nonce_used_by_a_template_reaches_the_header(rf):
    def view(request):
        html = engines["django"].from_string('<script nonce="{{ CSP_NONCE }}">1</script>').render(request=request)
        return HttpResponse(html)

    request = rf.get("/")
    middleware = CSPMiddleware(view)
    response = middleware(request)
    nonce = response.content.decode().split('nonce="')[1].split('"')[0]
    assert f"'nonce-{nonce}'" in response["Content-Security-Policy"]


def test_site_css_and_js_are_served_without_collectstatic(client):
    for path in ("/static/css/app.css", "/static/js/queue.js"):
        response = client.get(path)
        assert response.status_code == 200, path
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert len(body) > 1000
