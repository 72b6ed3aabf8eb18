"""Helpers for witness tests: the witness's HTTP client routed into Django's test client, and events."""

from __future__ import annotations

import httpx
from django.test import Client

from audit import notes
from audit.chain import Actor, record
from hitl_controlplane.signed_note import COSIGNATURE_V1, NoteKey

WITNESS_A = NoteKey.generate("witness-a.example", COSIGNATURE_V1)
WITNESS_B = NoteKey.generate("witness-b.example", COSIGNATURE_V1)


class DjangoTransport(httpx.BaseTransport):
    """httpx requests answered by Django's test client in this process (same test transaction)."""

    def __init__(self) -> None:
        self.client = Client()
        self.requests: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode("ascii")
        self.requests.append((request.method, path))
        answer = self.client.generic(
            request.method, path, data=request.read(), content_type=request.headers.get("content-type", "")
        )
        return httpx.Response(answer.status_code, headers=dict(answer.items()), content=answer.content)


def in_process_client() -> tuple[httpx.Client, DjangoTransport]:
    transport = DjangoTransport()
    return httpx.Client(transport=transport, base_url="http://testserver"), transport


def append_and_checkpoint(events: int = 3) -> str:
    for number in range(events):
        record("policy.changed", actor=Actor.system(), metadata={"n": number})
    return notes.issue_checkpoint()
