"""Benchmark settings: the app as deployed, plus a bare DRF baseline endpoint."""

from tests.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.perf.baseline"]  # noqa: F405
ROOT_URLCONF = "tests.perf.urls"
LOGGING = {"version": 1, "disable_existing_loggers": True, "root": {"level": "ERROR", "handlers": []}}
# Benchmark users get ready-made sessions and never type a password: hashing theirs with
# PBKDF2's million rounds only slowed the setup (~0.5 s a user, 50 reviewers in card_latency).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
