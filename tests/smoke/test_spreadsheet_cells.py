"""Every CSV cell that a spreadsheet would run as a formula is written as text
(hitl_controlplane.manifest.neutralize_cell, the one guard; the metrics CSV writes through it)."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from approvals.policy.tuning.metrics import _cell as safe_cell
from hitl_controlplane.manifest import FORMULA_PREFIXES as FORMULA_TRIGGERS


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1"])
def test_formula_starts_are_quoted(text):
    assert safe_cell(text) == "'" + text


@given(st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.text()))
def test_no_written_cell_starts_a_formula_and_plain_values_are_unchanged(value):
    cell = safe_cell(value)
    buffer = io.StringIO()
    csv.writer(buffer).writerow([cell])
    [[read]] = list(csv.reader(io.StringIO(buffer.getvalue())))
    assert not read.startswith(FORMULA_TRIGGERS) or isinstance(value, (int, float))
    if value is None:
        assert cell == ""
    elif not (isinstance(value, str) and value.startswith(FORMULA_TRIGGERS)):
        assert cell == value
