"""Pagination for API lists: cursors, so a page stays cheap however deep it is."""

from __future__ import annotations

from rest_framework import pagination

__all__ = ["NewestFirstCursorPagination"]


class NewestFirstCursorPagination(pagination.CursorPagination):
    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
