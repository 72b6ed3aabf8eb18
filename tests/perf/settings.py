"""Benchmark settings: the app as deployed, plus a bare DRF baseline endpoint."""

from controlplane.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.perf.baseline"]  # noqa: F405
ROOT_URLCONF = "tests.perf.urls"
LOGGING = {"version": 1, "disable_existing_loggers": True, "root": {"level": "ERROR", "handlers": []}}
