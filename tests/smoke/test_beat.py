"""One beat runs every periodic job; each entry must name a task a worker knows."""

from controlplane.celery import app


def test_every_beat_entry_names_a_registered_task():
    app.autodiscover_tasks(force=True)  # what a worker does at start-up
    app.finalize()
    schedule = app.conf.beat_schedule
    assert {
        "approvals.expire_overdue",
        "approvals.resolve_executions",
        "agents.deliver_due_callbacks",
        "approvals.notifications.escalate_overdue",
        "audit-verify-incremental",
        "slack-messages-sweep",
    } <= set(schedule)
    unknown = {name: entry["task"] for name, entry in schedule.items() if entry["task"] not in app.tasks}
    assert unknown == {}
