"""Helpers for export tests: download through the ASGI view, write and tamper files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.test import AsyncClient

from audit.chain import Actor
from audit.export import begin_export, iter_export
from audit.filters import AuditEventFilterSet
from hitl_controlplane.manifest import jsonl_hashed_text


def download(user: Any, url: str, **headers: str) -> tuple[Any, bytes]:
    """GET `url` through the async export view as `user` (None: anonymous); (response, body)."""
    client = AsyncClient(headers=headers)
    if user is not None:
        client.force_login(user)

    async def fetch() -> tuple[Any, bytes]:
        response = await client.get(url)
        if response.streaming:
            body = b"".join([chunk async for chunk in response.streaming_content])
        else:
            body = response.content
        return response, body

    return async_to_sync(fetch)()


def export_to(path: Path, fmt: str = "jsonl", **filters: str) -> dict[str, Any]:
    """Export with the server code to `path` (CSV: plus `path`.manifest.json); returns the manifest."""
    plan = begin_export(AuditEventFilterSet.from_query(filters), fmt, actor=Actor.system("test"))
    with path.open("w", encoding="utf-8", newline="") as handle:
        for text, _ in iter_export(plan):
            handle.write(text)
    assert plan.manifest is not None
    if fmt == "csv":
        manifest_path(path).write_text(json.dumps(plan.manifest), encoding="utf-8")
    return plan.manifest


def manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".manifest.json")


def jsonl_rows(body: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Split a JSONL export into its rows (each with the hashed text it carries as
    `canonical`) and its manifest trailer."""
    texts = body.decode("utf-8").splitlines()
    lines = [json.loads(line) for line in texts]
    assert set(lines[-1]) == {"manifest"}, "the last line is the manifest"
    rows = [{**row, "canonical": jsonl_hashed_text(text, row)} for text, row in zip(texts, lines[:-1])]
    return rows, lines[-1]["manifest"]
