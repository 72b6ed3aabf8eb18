"""A demo agent that keeps the control plane busy the way a real one would.

It opens with a tour of every kind of request (a critical wire with a reason and a
step-up, a batch of three emails, a suspension answered through a form, a plan),
then submits a realistic mix (mostly low-risk reads, some emails and service
restarts that wait for reviewers, a prohibited call now and then, an occasional
plan, wire, batch or suspension), follows each request to its decision, and executes its own approved
tool calls through claim/complete (server-executed types, such as `send_email`
and `demo_*`, are run by the Celery worker instead). It calls the approval
services directly, as an in-process agent host would, so it works before any
token is issued.

    python manage.py demo_agent [--interval 4] [--count N] [--max-pending 12]
"""

from __future__ import annotations

import random
import signal
import time
import uuid
from typing import Any

from django.core.management.base import BaseCommand

from agents.models import Agent
from approvals import services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.states import Kind, State
from audit.chain import Actor

DEMO_AGENT = "demo-agent"

PLAN = """# Rotate the staging database credentials

1. Create a new credential in the vault with a 30-day expiry.
2. Roll the staging app servers one at a time with the new secret.
3. Revoke the old credential once every server reports healthy.

Rollback: re-enable the old credential (kept disabled, not deleted, for 24 hours).
"""


SUSPENSION_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "title": "Pay it?", "description": "The invoice is over the monthly cap."},
        "limit": {"type": "number", "title": "New cap (EUR)", "default": 5000},
        "note": {"type": "string", "title": "Note for finance"},
    },
    "required": ["approved"],
}


def _wire(rng: random.Random) -> dict[str, Any]:
    """A critical request (seed_demo's demo_wire_critical rule: a step-up to approve), with a reason."""
    amount = rng.choice([12500, 48000, 250000])
    return {
        "kind": Kind.ACTION,
        "action_type": "demo_wire_money",
        "params": {
            "amount": amount,
            "currency": "EUR",
            "to": "ACME GmbH",
            "memo": f"Invoice {rng.randint(1000, 9999)}",
        },
        "target": {"account": "treasury-main"},
        "reason": "The supplier's invoice is due today; finance asked me to pay it before 17:00.",
    }


def _suspension(rng: random.Random) -> dict[str, Any]:
    """A workflow step paused for a typed answer (the card shows the schema's form)."""
    return {
        "kind": Kind.SUSPENSION,
        "action_type": "invoice-approval.over-cap",
        "workflow_id": "invoice-approval",
        "step_id": "over-cap",
        "plan_title": "Approve an invoice over the monthly cap",
        "plan_markdown": f"**Invoice {rng.randint(1000, 9999)}** is EUR 6,200; the cap is EUR 5,000.",
        "params": {"amount": 6200, "cap": 5000},
        "target": {"workflow_id": "invoice-approval", "step_id": "over-cap"},
        "resume_schema": SUSPENSION_SCHEMA,
    }


def _batch(rng: random.Random) -> list[dict[str, Any]]:
    """Three emails from one agent step: the queue shows them as one batch."""
    return [
        {
            "kind": Kind.ACTION,
            "action_type": "send_email",
            "params": {"to": [f"lead{i}@example.com"], "subject": f"Follow-up {i}: your trial", "body": "Hi!"},
            "target": {"mailbox": "sales"},
        }
        for i in range(1, 4)
    ]


def _tour(rng: random.Random) -> list[list[dict[str, Any]]]:
    """What the demo agent sends first, so a newcomer sees every kind of request at once."""
    plan = {
        "kind": Kind.PLAN,
        "plan_path": "plans/rotate-staging-credentials.md",
        "plan_title": "Rotate the staging database credentials",
        "plan_markdown": PLAN,
    }
    return [[_wire(rng)], _batch(rng), [_suspension(rng)], [_scenario(rng)], [plan]]


def _next(rng: random.Random) -> list[dict[str, Any]]:
    """After the tour: the daily mix, with a critical wire, a batch or a suspension now and then."""
    roll = rng.random()
    if roll < 0.06:
        return [_wire(rng)]
    if roll < 0.10:
        return _batch(rng)
    if roll < 0.14:
        return [_suspension(rng)]
    return [_scenario(rng)]


def _scenario(rng: random.Random) -> dict[str, Any]:
    """One submission, drawn from a mix weighted like a day's real traffic."""
    roll = rng.random()
    n = rng.randint(1, 9999)
    if roll < 0.45:
        action = rng.choice(
            [
                ("read_file", {"path": f"docs/guide-{n}.md"}, {"repo": "handbook"}),
                ("search_docs", {"query": rng.choice(["refund policy", "SLA", "on-call rota"])}, {"index": "kb"}),
                ("list_tickets", {"status": "open", "limit": 20}, {"queue": "support"}),
                ("get_customer", {"customer_id": f"C-{n}"}, {"crm": "main"}),
            ]
        )
    elif roll < 0.60:
        action = (
            "demo_restart_service",
            {
                "service": rng.choice(["search", "billing-worker", "thumbnailer"]),
                "reason": "memory above 90% for 10 minutes",
            },
            {"cluster": "staging"},
        )
    elif roll < 0.75:
        action = (
            "send_email",
            {
                "to": [f"customer{n}@example.com"],
                "subject": f"Your ticket #{n}",
                "body": "We fixed the issue you reported. Thanks for your patience.",
            },
            {"mailbox": "support"},
        )
    elif roll < 0.83:
        action = (
            "send_email",
            {
                "to": [f"user{i}@example.com" for i in range(25)],
                "subject": "Planned maintenance",
                "body": "Saturday 02:00-04:00 UTC the service will be read-only.",
            },
            {"mailbox": "announcements"},
        )
    elif roll < 0.90:
        action = (
            "update_document",
            {"content": f"Revised onboarding checklist, rev {n}."},
            {"document": "onboarding.md"},
        )
    elif roll < 0.95:
        action = ("delete_database", {"name": "staging"}, {"cluster": "staging"})
    else:
        return {
            "kind": Kind.PLAN,
            "plan_path": "plans/rotate-staging-credentials.md",
            "plan_title": "Rotate the staging database credentials",
            "plan_markdown": PLAN,
        }
    action_type, params, target = action
    return {"kind": Kind.ACTION, "action_type": action_type, "params": params, "target": target}


class Command(BaseCommand):
    help = "Submit a realistic mix of actions and plans as the demo agent and follow their decisions."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--interval", type=float, default=4.0, help="Seconds between submissions.")
        parser.add_argument("--count", type=int, default=0, help="Stop after this many submissions (0: never).")
        parser.add_argument("--max-pending", type=int, default=12, help="Pause submitting while this many wait.")
        parser.add_argument("--seed", type=int, default=None)

    def handle(self, *args, interval: float, count: int, max_pending: int, seed: int | None, **options) -> None:
        agent, _ = Agent.objects.get_or_create(name=DEMO_AGENT)
        actor = Actor.for_agent(agent)
        rng = random.Random(seed)
        run_id = f"demo-run-{uuid.uuid4().hex[:8]}"
        running = True

        def stop(signum, frame) -> None:
            nonlocal running
            running = False

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

        watching: dict[str, str] = {}
        tour = _tour(rng)
        submitted = 0
        self._say(f"started as {agent.name} (run {run_id})")
        next_submit = 0.0
        while running:
            if time.monotonic() >= next_submit and (not count or submitted < count):
                pending = sum(1 for state in watching.values() if state == State.PENDING_APPROVAL)
                if pending < max_pending:
                    step = tour.pop(0) if tour else _next(rng)
                    batch_id = f"step-{uuid.uuid4().hex[:8]}" if len(step) > 1 else ""
                    for fields in step:
                        request = self._submit(agent, fields, run_id, batch_id)
                        submitted += 1
                        watching[str(request.pk)] = request.state
                next_submit = time.monotonic() + interval
            self._follow(watching, agent, actor)
            if count and submitted >= count:
                break  # with --count, report the submissions and leave the rest to reviewers
            time.sleep(0.5)
        self._say(f"stopped after {submitted} submissions")

    def _submit(self, agent: Agent, fields: dict[str, Any], run_id: str, batch_id: str = "") -> ApprovalRequest:
        request = services.submit(
            services.Submission(
                run_id=run_id,
                tool_call_id=f"call-{uuid.uuid4().hex[:10]}",
                idempotency_key=uuid.uuid4().hex,
                batch_id=batch_id,
                **fields,
            ),
            agent=agent,
        )
        what = request.plan_title if request.kind in (Kind.PLAN, Kind.SUSPENSION) else request.action_type
        self._say(f"submitted {what} [{request.risk_level}] -> {request.state}")
        return request

    def _follow(self, watching: dict[str, str], agent: Agent, actor: Actor) -> None:
        """Report state changes; execute our own approved calls; forget finished ones."""
        for request in ApprovalRequest.objects.filter(pk__in=list(watching)):
            key = str(request.pk)
            if request.state != watching[key]:
                detail = f" ({request.resolution_code})" if request.resolution_code else ""
                feedback = f' feedback: "{request.feedback}"' if request.feedback else ""
                self._say(f"{request.action_type} {watching[key]} -> {request.state}{detail}{feedback}")
                watching[key] = request.state
            if request.state == State.APPROVED and request.has_execution_step and not request.executor:
                self._execute_myself(request, agent, actor)
                continue
            if request.is_terminal:
                del watching[key]

    def _execute_myself(self, request: ApprovalRequest, agent: Agent, actor: Actor) -> None:
        try:
            grant = services.claim_execution(request.pk, actor=actor, agent=agent)
        except DomainError as exc:
            if exc.code != "emergency_stop":
                self._say(f"could not claim {request.action_type}: {exc.code}")
            return
        # The "tool" itself: a demo read returns a few rows.
        services.complete_execution(
            request.pk, token=grant.token, succeeded=True, actor=actor, result={"rows": len(grant.params) + 2}
        )

    def _say(self, message: str) -> None:
        self.stdout.write(f"[demo-agent] {message}")
        self.stdout.flush()
