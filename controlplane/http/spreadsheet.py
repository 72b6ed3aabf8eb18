"""Cells for CSV files people open in spreadsheets.

A cell starting with = + - @ (or a TAB or CR, which some spreadsheets strip before
looking) is run as a formula by Excel, LibreOffice and Google Sheets (CSV/formula
injection). Names, targets and labels in our CSVs come from agents and admins, so
every CSV the project writes passes its text cells through `safe_cell`, which
prefixes such a cell with a single quote: shown as text, never evaluated.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FORMULA_TRIGGERS", "safe_cell"]

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """`value` as a CSV cell: None is empty, text that could start a formula is quoted."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_TRIGGERS):
        return "'" + value
    return value
