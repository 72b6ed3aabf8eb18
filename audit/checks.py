"""System checks of the audit app's configuration: the witnesses (audit.witnesses)."""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured

from .witnesses import configured


@register()
def witness_settings(app_configs: Any, **kwargs: Any) -> list[Error]:
    """audit.E001: AUDIT_WITNESSES holds cosignature/v1 vkeys, each once, and the quorum fits them."""
    try:
        configured()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), hint="docs/audit.md, 'Witnesses' (hitl-witness vkey prints a vkey).", id="audit.E001")]
    return []
