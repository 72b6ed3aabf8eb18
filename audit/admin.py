"""The audit log in the admin: viewable and filterable, never added, changed or deleted."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["seq", "occurred_at", "verb", "actor_kind", "actor_label", "request_id", "agent_id"]
    list_filter = ["verb", "actor_kind"]
    search_fields = ["verb", "actor_label"]
    date_hierarchy = "occurred_at"
    show_full_result_count = False  # a COUNT(*) over millions of rows on every page is waste

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
