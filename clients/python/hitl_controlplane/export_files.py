"""Reading an audit export back, row by row, exactly as the exporter wrote it (for the
offline verifier, `hitl_controlplane.verify`). Plain Python: imports nothing from Django."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .manifest import CSV_COLUMNS, UNSIGNED_CSV_COLUMNS, jsonl_hashed_text, restore_cell

__all__ = ["Rejected", "detect_format", "int_or_none", "jsonl_rows", "csv_rows", "read_trailer"]

_TRAILER_SCAN_BYTES = 1 << 20


class Rejected(Exception):
    def __init__(self, reason: str, seq: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.seq = seq


def detect_format(path: Path) -> str:
    if path.suffix.lower() == ".csv":
        return "csv"
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    with path.open("rb") as handle:
        start = handle.read(1)
    return "jsonl" if start == b"{" else "csv"


def read_trailer(path: Path) -> dict[str, Any] | None:
    """The JSONL manifest trailer (the last non-empty line), read from the end of the file."""
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - _TRAILER_SCAN_BYTES))
        tail = handle.read()
    lines = [line for line in tail.split(b"\n") if line.strip()]
    if not lines:
        return None
    try:
        last = json.loads(lines[-1].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if isinstance(last, dict) and set(last) == {"manifest"} and isinstance(last["manifest"], dict):
        return last["manifest"]
    return None


def jsonl_rows(handle: IO[str]) -> Iterator[dict[str, Any]]:
    """Yield row dicts; the manifest trailer ends the rows. Raises Rejected on a malformed line."""
    seen_trailer = False
    for line_number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        if not line.endswith("\n") or line.endswith("\r\n") or "\r" in line:
            raise Rejected(f"line {line_number} does not end in a single newline, as the exporter writes it")
        if seen_trailer:
            raise Rejected(f"line {line_number}: data after the manifest trailer")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise Rejected(f"line {line_number} is not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise Rejected(f"line {line_number} is not a JSON object")
        if set(obj) == {"manifest"}:
            # The trailer is verified by its signature over the parsed manifest; holding its
            # bytes to the one form the exporter writes makes every byte of the file count.
            if line != json.dumps(obj, sort_keys=True, ensure_ascii=False) + "\n":
                raise Rejected(f"line {line_number}: the manifest trailer is not in the exporter's exact form")
            seen_trailer = True
            continue
        missing = {"seq", "prev_hash", "hash", "event"} - set(obj)
        if missing:
            raise Rejected(f"line {line_number} lacks {', '.join(sorted(missing))}", int_or_none(obj.get("seq")))
        if "canonical" not in obj:  # the current layout: the hashed text is the `event` bytes themselves
            hashed = jsonl_hashed_text(line, obj)
            if hashed is None:
                raise Rejected(
                    f"line {line_number} is not byte for byte as exported (was it re-serialized?): "
                    "the hashed text cannot be recovered from it",
                    int_or_none(obj.get("seq")),
                )
            obj["canonical"] = hashed
        yield {"line": line_number, **obj}


def csv_rows(handle: IO[str]) -> Iterator[dict[str, Any]]:
    reader = csv.reader(handle)
    header = next(reader, None)
    # Exports written before rows carried signatures have the event's columns only.
    columns = tuple(header or ())
    if columns not in (CSV_COLUMNS, UNSIGNED_CSV_COLUMNS):
        raise Rejected(f"the CSV header is not {','.join(CSV_COLUMNS)}")
    for cells in reader:
        line_number = reader.line_num
        if len(cells) != len(columns):
            raise Rejected(f"CSV record ending on line {line_number} has {len(cells)} cells, not {len(columns)}")
        row = dict(zip(columns, cells))
        yield {
            "line": line_number,
            "seq": int_or_none(row["seq"]) if row["seq"].isdigit() else row["seq"],
            "prev_hash": row["prev_hash"],
            "hash": row["hash"],
            "canonical": row["canonical"],
            **(
                {"key_id": restore_cell(row["key_id"]), "signature": restore_cell(row["signature"])}
                if "key_id" in row
                else {}
            ),
            "cells": cells,
        }


def int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
