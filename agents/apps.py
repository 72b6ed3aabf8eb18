from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # After each committed change, queue the agent's callback (agents/callbacks.py).
        from approvals import broadcast

        from .callbacks import on_request_change

        broadcast.subscribe(on_request_change)

        # Sockets close when their token is revoked or their agent deactivated (signal receivers).
        from . import consumers  # noqa: F401
