"""The emergency stop: while on, nothing auto-approves, is approved, claimed or executed.

Requests still queue and may be rejected (approving waits until the stop is
lifted, `services.guards`); executions already running finish or time out
and are reported. There are three layers, and any one of them stops an agent:

- ``settings.EMERGENCY_STOP`` (the environment's floor: a deployment can start
  stopped, and no one can lift it at run time);
- the global run-time switch, flipped by admins in the admin site or with
  ``python manage.py emergency_stop [--off]``;
- an agent's own run-time switch (``--agent NAME``).

`is_stopped(agent)` is the one place the check lives. `set_emergency_stop` is the
one way to flip a switch: it audits the change (``emergency_stop.changed``) in the
same transaction and, after commit, tells every reviewer screen through the
channel-layer group ``emergency`` (message type ``emergency.changed``; consumer
method ``emergency_changed``), so dashboards can show or clear their banner.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from audit.chain import Actor

__all__ = [
    "EMERGENCY_GROUP",
    "MESSAGE_TYPE",
    "StopState",
    "current_stop_state",
    "is_stopped",
    "set_emergency_stop",
]

EMERGENCY_GROUP = "emergency"
MESSAGE_TYPE = "emergency.changed"


def is_stopped(agent) -> bool:
    """True when `agent` may not auto-approve, claim or execute anything now.

    One indexed query; deliberately uncached, so a flip takes effect at once in
    every process.
    """
    from .models import EmergencyStop

    if settings.EMERGENCY_STOP:
        return True
    scopes = Q(scope=EmergencyStop.GLOBAL)
    if agent is not None:
        scopes |= Q(scope=EmergencyStop.scope_for(agent))
    return EmergencyStop.objects.filter(scopes, on=True).exists()


@dataclass(frozen=True)
class StopState:
    """One switch as screens show it (also the payload of ``emergency.changed``)."""

    scope: str  # "global" or "agent"
    on: bool
    agent_id: int | None = None
    agent_name: str = ""
    reason: str = ""
    changed_by: str = ""
    changed_at: str = ""
    from_settings: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def current_stop_state() -> dict[str, Any]:
    """What a reviewer's banner needs: ``{"global": StopState | None, "agents": [StopState, ...]}``.

    ``global`` is None when no global stop is on; ``agents`` lists the agents whose
    own stop is on. One query.
    """
    from .models import EmergencyStop

    switches = {s.scope: s for s in EmergencyStop.objects.select_related("agent").filter(on=True)}
    global_state = None
    if settings.EMERGENCY_STOP:
        global_state = StopState(
            scope="global",
            on=True,
            reason="EMERGENCY_STOP is set in the environment.",
            changed_by="settings",
            from_settings=True,
        )
    elif EmergencyStop.GLOBAL in switches:
        global_state = _state(switches[EmergencyStop.GLOBAL])
    agents = [_state(s) for scope, s in sorted(switches.items()) if scope != EmergencyStop.GLOBAL]
    return {"global": global_state, "agents": agents}


def _state(switch) -> StopState:
    return StopState(
        scope="global" if switch.agent_id is None else "agent",
        on=switch.on,
        agent_id=switch.agent_id,
        agent_name=switch.agent.name if switch.agent_id else "",
        reason=switch.reason,
        changed_by=switch.changed_by_label,
        changed_at=switch.changed_at.isoformat(),
    )


def set_emergency_stop(*, on: bool, agent=None, actor: Actor | None = None, reason: str = "") -> bool:
    """Switch the global stop (``agent=None``) or `agent`'s stop on or off.

    `actor`: the admin (a `Person`) or, for a command run without one, the system
    (the default). Returns False, auditing nothing, when the switch was already in
    that position. On commit, reviewers get ``emergency.changed``. Lifting a stop
    lets the sweeper run the approved requests that waited.
    """
    from audit.chain import digest, record

    from .atomic import after_commit, changing_row
    from .models import EmergencyStop
    from .people import user_of

    actor = actor or Actor.system()
    with changing_row(EmergencyStop, create={"agent": agent}, scope=EmergencyStop.scope_for(agent)) as switch:
        if switch.on == on:
            return False
        switch.on = on
        switch.reason = reason
        switch.changed_at = timezone.now()
        switch.changed_by = user_of(actor)
        switch.changed_by_label = actor.label
        switch.save()
        record(
            "emergency_stop.changed",
            actor=actor,
            metadata={
                "scope": "global" if agent is None else "agent",
                "on": on,
                **({"agent_id": agent.pk, "agent": agent.name} if agent is not None else {}),
                "reason": digest(reason),
            },
        )
        state = _state(switch)
        after_commit(lambda: _announce(state), what="the emergency stop change")
    return True


def _announce(state: StopState) -> None:
    # At-most-once, like every push: screens resync on reconnect.
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(EMERGENCY_GROUP, {"type": MESSAGE_TYPE, **state.as_dict()})
