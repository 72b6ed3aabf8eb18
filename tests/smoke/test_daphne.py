"""The app served by a real daphne process answers over a socket."""

import json
import urllib.request

import pytest


@pytest.mark.django_db(transaction=True)
def test_daphne_serves_health_and_the_login_page(daphne_server):
    with urllib.request.urlopen(f"{daphne_server.url}/healthz", timeout=5) as response:
        assert json.load(response) == {"status": "ok"}
    with urllib.request.urlopen(f"{daphne_server.url}/admin/login/", timeout=5) as response:
        assert b"csrfmiddlewaretoken" in response.read()
