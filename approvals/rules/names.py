"""Action type names: normalized before any rule reads them (a fuller version with
word splitting lands with the fail-closed engine)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["ActionTypeError", "ActionTypeName", "parse_action_type"]


class ActionTypeError(ValueError):
    """An action type outside the documented syntax."""


@dataclass(frozen=True)
class ActionTypeName:
    normalized: str
    sent: str


_SYNTAX = re.compile(r"[a-z0-9][a-z0-9_.\-]{0,199}\Z")
_JUNK = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


def parse_action_type(raw: str) -> ActionTypeName:
    """NFKC, surrounding junk stripped (`sent`), case-folded (`normalized`); refuses
    anything but ASCII letters, digits, `_`, `-` and `.`."""
    sent = _JUNK.sub("", unicodedata.normalize("NFKC", raw or ""))
    if not _SYNTAX.match(sent.casefold()):
        raise ActionTypeError(
            f"{raw!r} is not an action type: use letters, digits, '_', '-' and '.' (e.g. 'github.create_issue')."
        )
    return ActionTypeName(sent.casefold(), sent)
