from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # After each committed transition, queue the agent's callback (agents/callbacks.py).
        from approvals.services import request_changed

        from .callbacks import on_request_changed

        request_changed.connect(on_request_changed, dispatch_uid="queue-agent-callbacks")

        # Sockets close when their token is revoked or their agent deactivated (signal receivers).
        from . import consumers  # noqa: F401
