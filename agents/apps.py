from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # After each committed transition, queue the agent's callback (agents/callbacks.py).
        # The audit pages show agents under their current names (audit/subjects.py): the
        # audit app may not import this one, so this one tells it how.
        from approvals.services import request_changed
        from audit import subjects

        from .callbacks import on_request_changed

        request_changed.connect(on_request_changed, dispatch_uid="queue-agent-callbacks")
        subjects.register_agent_names(_agent_names)

        # Sockets close when their token is revoked or their agent deactivated (signal receivers).
        from . import consumers  # noqa: F401


def _agent_names(ids):
    """The names of the agents with these ids, by id, in one query."""
    from .models import Agent

    return dict(Agent.objects.filter(pk__in=ids).values_list("pk", "name"))
