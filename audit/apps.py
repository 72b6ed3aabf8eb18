from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit log"

    def ready(self) -> None:
        from . import db  # noqa: F401  (registers the SQLite maintenance function on connect)
