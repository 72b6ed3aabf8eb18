"""Masked params: what reviewers, notifications and the API show instead of a value a
rule marks masked. One mask, everywhere."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["MASK", "masked"]

MASK = "••••••"


def masked(params: Mapping[str, Any], keys: Collection[str]) -> dict[str, Any]:
    """`params` with the values of `keys` replaced by the mask."""
    return {key: (MASK if key in keys else value) for key, value in params.items()}
