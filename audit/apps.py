from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit log"

    def ready(self) -> None:
        from . import checks, db  # noqa: F401  (db registers the SQLite maintenance function on connect)
