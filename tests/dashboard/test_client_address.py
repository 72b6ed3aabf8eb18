"""Sign-in throttling keys on the real client behind a trusted proxy, and a client
cannot pick its own address by writing X-Forwarded-For."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from controlplane.http.client_address import client_address

PROXY = "10.0.0.5"


def request_from(peer: str, forwarded: str | None = None):
    extra = {"REMOTE_ADDR": peer}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return RequestFactory().get("/login/", **extra)


@pytest.fixture
def behind_proxy(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/24"]


def test_without_trusted_proxies_the_header_is_ignored(settings):
    settings.TRUSTED_PROXIES = []
    assert client_address(request_from("203.0.113.9", "198.51.100.1")) == "203.0.113.9"


def test_a_trusted_proxy_names_the_client(behind_proxy):
    assert client_address(request_from(PROXY, "198.51.100.7")) == "198.51.100.7"
    assert client_address(request_from(PROXY, "198.51.100.8")) == "198.51.100.8"


def test_a_client_cannot_prepend_its_own_choice(behind_proxy):
    # The client wrote "1.2.3.4"; the proxy appended the address it really saw.
    assert client_address(request_from(PROXY, "1.2.3.4, 198.51.100.7")) == "198.51.100.7"


def test_chained_trusted_proxies_are_skipped(behind_proxy):
    assert client_address(request_from(PROXY, "198.51.100.7, 10.0.0.9")) == "198.51.100.7"


def test_an_untrusted_peer_cannot_forward(behind_proxy):
    assert client_address(request_from("203.0.113.9", "198.51.100.7")) == "203.0.113.9"


@pytest.mark.parametrize("garbled", ["", "not-an-ip", "198.51.100.7, <script>", "\x00"])
def test_a_garbled_header_falls_back_to_the_peer(behind_proxy, garbled):
    assert client_address(request_from(PROXY, garbled)) == PROXY


def test_throttling_one_client_behind_the_proxy_leaves_the_others_alone(behind_proxy, client, people, settings):
    for _ in range(settings.LOGIN_FREE_FAILURES + 1):
        client.post(
            "/login/", {"login": "alice", "password": "wrong"}, REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.66"
        )
    response = client.post(
        "/login/",
        {"login": "alice", "password": "alice-pw-123!"},
        REMOTE_ADDR=PROXY,
        HTTP_X_FORWARDED_FOR="198.51.100.7",
    )
    assert response.status_code == 302, response.content.decode()[:500]
