from django.apps import AppConfig


class BaselineConfig(AppConfig):
    name = "tests.perf.baseline"
    label = "perf_baseline"
    default_auto_field = "django.db.models.BigAutoField"
