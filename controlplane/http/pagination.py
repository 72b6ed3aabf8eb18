"""Pagination for API lists: cursors, so a page stays cheap however deep it is."""

from __future__ import annotations

from rest_framework import pagination
from rest_framework.exceptions import ValidationError

__all__ = ["NewestFirstCursorPagination"]


class NewestFirstCursorPagination(pagination.CursorPagination):
    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def get_page_size(self, request) -> int:
        """`?page_size=` from 1 to `max_page_size`; anything else is 422 naming it (DRF's
        default quietly falls back to 50 for `abc` or `-1`, and caps 10**40 at the maximum)."""
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None or raw == "":
            return self.page_size
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 6 or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError(
                {self.page_size_query_param: [f"A whole number from 1 to {self.max_page_size}."]}, code="invalid"
            )
        return int(raw)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter.get("name") == self.page_size_query_param:
                parameter["schema"] = {**parameter.get("schema", {}), "minimum": 1, "maximum": self.max_page_size}
        return parameters
