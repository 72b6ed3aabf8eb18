"""Notifications and escalation for pending requests, per rule.

- `RuleNotification` (per rule name): email the approver group when a card arrives,
  remind before `decide_by`, escalate to a second group after a set time undecided,
  how far a reviewer may extend `decide_by` (once), and an optional webhook.
- Entry points (`approvals.notifications.dispatch`, each also a Celery task in
  `approvals.notifications.tasks`): `queue_arrival`, `send_due_reminders`,
  `escalate_overdue`, `deliver_due`, `deliver`.
- Nothing here sends mail or calls a webhook in a web request: arrivals are
  queued as outbox rows after the submitting transaction commits (a `request_changed`
  subscriber) and a task delivers them. Payloads never carry masked params' values.

This package's `models` module is imported by `approvals.models`; keep this file
free of imports so that stays cycle-free.
"""
