"""The emergency stop: while on, nothing auto-approves, is claimed or executes.

Requests still queue for review. The runtime issue adds a switch admins flip at
run time; both the global setting and an agent's own stop are read here only.
"""

from __future__ import annotations

from django.conf import settings


def is_stopped(agent) -> bool:
    return bool(settings.EMERGENCY_STOP or getattr(agent, "emergency_stop", False))
