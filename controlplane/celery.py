"""The Celery app: a real worker and beat in every deployment.

Broker: Redis when REDIS_URL is set; otherwise kombu's filesystem transport in
VAR_DIR/broker, which needs no server and works across the worker, beat and web
processes of one machine (see docs/deploy.md). Tasks never run eagerly outside
unit tests; results are not stored (the database holds every outcome).
"""

import os

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("controlplane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Apps whose tasks live in a subpackage (`approvals.execution.tasks`, `approvals.notifications.tasks`).
app.autodiscover_tasks(["approvals.chat", "approvals.execution", "approvals.notifications", "controlplane.accounts"])


@worker_init.connect
@beat_init.connect
def _refuse_unsafe_secrets(**kwargs) -> None:
    """The worker and beat refuse to start on development secrets outside DEBUG (controlplane/keys.py)."""
    from django.conf import settings

    from controlplane import keys

    try:
        keys.refuse_unsafe(settings)
    except keys.UnsafeSecrets as refusal:
        # Celery logs and swallows exceptions from signal handlers; SystemExit stops the process.
        raise SystemExit(str(refusal)) from None


@app.on_after_finalize.connect
def _install_beat_schedule(sender: Celery, **kwargs) -> None:
    """Every periodic task of the project, in one place (run exactly one beat)."""
    from celery.schedules import crontab

    from agents.tasks import beat_schedule as agents_schedule
    from approvals.chat.tasks import beat_schedule as chat_schedule
    from approvals.execution.tasks import beat_schedule as approvals_schedule
    from approvals.notifications.tasks import beat_schedule as notifications_schedule
    from controlplane.accounts.tasks import beat_schedule as accounts_schedule

    schedule = {
        **approvals_schedule(),
        **agents_schedule(),
        **notifications_schedule(),
        **accounts_schedule(),
        **chat_schedule(),
        # audit/tasks.py: incremental verification + signed checkpoint, and a nightly full pass.
        "audit-verify-incremental": {"task": "audit.verify_chain", "schedule": 300.0},
        # audit/tasks.py: a C2SP checkpoint for the witnesses, when the log grew.
        "audit-checkpoint": {"task": "audit.issue_checkpoint", "schedule": 300.0},
        "audit-verify-full": {
            "task": "audit.verify_chain",
            "schedule": crontab(hour=3, minute=17),
            "kwargs": {"full": True},
        },
    }
    sender.conf.beat_schedule = {**schedule, **(sender.conf.beat_schedule or {})}
