"""Auditors' pages and exports, mounted at /audit/."""

from django.urls import path

from . import proof_views, views, witness_views

app_name = "audit"

urlpatterns = [
    path("", views.audit_log, name="log"),
    path("events/<int:seq>/", views.event_detail, name="event"),
    path("requests/<uuid:request_id>/", views.request_timeline, name="timeline"),
    path("export.csv", views.export_csv, name="export_csv"),
    path("export.jsonl", views.export_jsonl, name="export_jsonl"),
    # The signed manifest (the CSV sidecar; JSONL exports carry it as their last line too).
    path("export.csv.manifest", views.export_manifest, name="export_manifest"),
    # The Merkle tree over the events (audit.tree): auditors' JSON.
    path("tree/", proof_views.tree_head, name="tree"),
    path("tree/inclusion", proof_views.inclusion, name="tree_inclusion"),
    # The newest C2SP signed-note checkpoint with its cosignatures (audit.witness_views): public, text/plain.
    path("checkpoint", witness_views.checkpoint_view, name="checkpoint"),
    path("tree/consistency", proof_views.consistency, name="tree_consistency"),
    # What witnesses use (public): proofs between published checkpoints, and posting a cosignature.
    path("checkpoint/consistency", witness_views.checkpoint_consistency, name="checkpoint_consistency"),
    path("checkpoint/cosignatures", witness_views.post_cosignature, name="checkpoint_cosignatures"),
]
