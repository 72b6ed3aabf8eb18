"""An auditor, in a real browser: filters the log, exports it, and the downloaded
file verifies offline with the key the auditor holds."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from audit.chain import Actor, record
from audit.signing import signer
from hitl_controlplane.verify import verify_export

REFUND = SimpleNamespace(pk=uuid.UUID("6f1c1f52-4c7e-4d59-9d3a-1f2e3d4c5b6a"), agent_id=None)


@pytest.fixture
def ann(transactional_db):
    user = get_user_model().objects.create_user("ann", password="ann-audits-123!")
    user.groups.add(Group.objects.get(name="auditors"))
    return user


@pytest.fixture
def refund_history(transactional_db):
    alice = Actor(kind="user", id="1", label="alice")
    record("request.submitted", actor=Actor(kind="agent", id="7", label="refund-bot"), request=REFUND)
    record("request.queued", actor=Actor.system(), request=REFUND, metadata={"risk_level": "high", "rule": "refunds"})
    record("decision.recorded", actor=alice, request=REFUND, metadata={"verdict": "approve"})
    record("request.approved", actor=alice, request=REFUND, metadata={"to": "approved"})


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_auditor_filters_exports_and_verifies_offline(ann, refund_history, logged_in_page, tmp_path, artifacts_dir):
    page = logged_in_page("ann", "ann-audits-123!")
    page.goto("/audit/")
    assert page.locator("#audit-events tbody tr").count() >= 4

    page.select_option("select[name=verb]", "decision.recorded")
    page.click("#audit-filters button[type=submit]")
    page.wait_for_url("**/audit/?*verb=decision.recorded*")
    rows = page.locator("#audit-events tbody tr")
    assert rows.count() == 1
    assert "alice" in rows.first.inner_text()
    page.screenshot(path=str(artifacts_dir / "auditor-filtered-log.png"), full_page=True)

    with page.expect_download() as jsonl_download:
        page.click("#export-jsonl")
    filtered = tmp_path / jsonl_download.value.suggested_filename
    jsonl_download.value.save_as(filtered)
    verdict = verify_export(filtered, key=[signer().current.public])
    assert verdict.ok, verdict.message
    assert verdict.rows == 1 and '"verb": "decision.recorded"' in verdict.message

    page.goto("/audit/")
    with page.expect_download() as whole_download:
        page.click("#export-jsonl")
    whole = tmp_path / "whole.jsonl"
    whole_download.value.save_as(whole)
    verdict = verify_export(whole, key=[signer().current.public])
    assert verdict.ok, verdict.message
    assert "unfiltered chain" in verdict.message

    page.goto("/audit/")
    assert page.locator("text=Recent exports").count() == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_csv_export_offers_its_manifest_and_both_verify_with_the_command_the_page_shows(
    ann, refund_history, logged_in_page, tmp_path, artifacts_dir
):
    import subprocess

    page = logged_in_page("ann", "ann-audits-123!")
    page.goto("/audit/")
    shown = page.locator(".audit-exports").inner_text()
    assert "hitl-audit-verify FILE.csv --manifest FILE.csv.manifest.json" in shown
    assert "python -m audit.verify" not in page.content()

    with page.expect_download() as csv_download:
        page.click("#export-csv")
    exported = tmp_path / csv_download.value.suggested_filename
    csv_download.value.save_as(exported)
    offer = page.locator("#csv-manifest-link")
    offer.wait_for()
    with page.expect_download() as manifest_download:
        offer.click()
    manifest = tmp_path / (exported.name + ".manifest.json")
    manifest_download.value.save_as(manifest)
    page.locator("#csv-manifest").screenshot(path=str(artifacts_dir / "auditor-csv-manifest.png"))

    key = tmp_path / "server.pub"
    key.write_text(signer().current.public_text + "\n", encoding="utf-8")
    # The command as the page words it, run from outside the server checkout.
    result = subprocess.run(
        ["hitl-audit-verify", str(exported), "--manifest", str(manifest), "--public-key-file", str(key)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
