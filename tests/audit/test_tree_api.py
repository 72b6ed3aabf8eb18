"""The auditors' tree endpoints: proofs that verify with the client's functions, stable JSON errors."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.chain import audited_atomic, record
from audit.models import AuditEvent
from hitl_controlplane import merkle


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def eleven_events(system) -> None:
    for count in (4, 7):
        with audited_atomic():
            for _ in range(count):
                record("request.queued", actor=system)


def _hex(values: list[str]) -> list[bytes]:
    return [bytes.fromhex(value) for value in values]


@pytest.mark.django_db
def test_inclusion_and_consistency_proofs_verify_offline(eleven_events, auditor_ann):
    client = client_for(auditor_ann)
    head = client.get("/audit/tree/").json()
    assert head["tree_size"] == 11
    for seq in (1, 6, 11):
        body = client.get(
            f"/audit/tree/inclusion?seq={seq}&size=9" if seq < 9 else f"/audit/tree/inclusion?seq={seq}"
        ).json()
        size = body["tree_size"]
        event_hash = AuditEvent.objects.get(seq=seq).hash
        assert bytes.fromhex(body["leaf_hash"]) == merkle.event_leaf_hash(event_hash)
        assert merkle.verify_inclusion(
            seq - 1, size, merkle.event_leaf_hash(event_hash), _hex(body["proof"]), bytes.fromhex(body["root_hash"])
        )
    body = client.get("/audit/tree/consistency?first=4&size=11").json()
    assert body["root_hash"] == head["root_hash"]
    assert merkle.verify_consistency(
        4, 11, bytes.fromhex(body["first_root"]), bytes.fromhex(body["root_hash"]), _hex(body["proof"])
    )
    assert client.get("/audit/tree/?size=4").json()["root_hash"] == body["first_root"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "code", "status", "field"),
    [
        ("/audit/tree/inclusion", "invalid_tree_query", 400, "seq"),
        ("/audit/tree/inclusion?seq=0", "invalid_tree_query", 400, "seq"),
        ("/audit/tree/inclusion?seq=%C2%B2", "invalid_tree_query", 400, "seq"),
        ("/audit/tree/inclusion?seq=5&size=4", "invalid_tree_query", 400, "seq"),
        ("/audit/tree/inclusion?seq=1&size=99999999999999999999", "invalid_tree_query", 400, "size"),
        ("/audit/tree/consistency?first=9&size=4", "invalid_tree_query", 400, "first"),
        ("/audit/tree/consistency?first=-1", "invalid_tree_query", 400, "first"),
        ("/audit/tree/consistency?first=1&size=12", "tree_size_unknown", 404, None),
        ("/audit/tree/?size=12", "tree_size_unknown", 404, None),
    ],
)
def test_bad_queries_are_json_errors_with_stable_codes(eleven_events, auditor_ann, url, code, status, field):
    response = client_for(auditor_ann).get(url)
    assert response.status_code == status
    body = response.json()
    assert body["code"] == code
    if field:
        assert body["details"]["field"] == field
    else:
        assert body["details"]["tree_size"] == 11


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/audit/tree/", "/audit/tree/inclusion?seq=1", "/audit/tree/consistency?first=1"])
def test_only_auditors_read_the_tree_and_nobody_writes_it(eleven_events, auditor_ann, reviewer, url):
    assert client_for(None).get(url).json()["code"] == "not_authenticated"
    refused = client_for(reviewer).get(url)
    assert (refused.status_code, refused.json()["code"]) == (403, "permission_denied")
    assert client_for(auditor_ann).post(url).json()["code"] == "method_not_allowed"
    assert client_for(auditor_ann).get(url)["Cache-Control"] == "no-store"


@pytest.mark.django_db
def test_the_event_page_shows_its_inclusion_proof(eleven_events, auditor_ann):
    content = client_for(auditor_ann).get("/audit/events/3/").content.decode()
    assert 'id="tree-check" class="chain-ok">yes' in content
    assert merkle.event_leaf_hash(AuditEvent.objects.get(seq=3).hash).hex() in content
    assert "/audit/tree/inclusion?seq=3&amp;size=11" in content
