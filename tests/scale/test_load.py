"""Load with duplicates: 20 agents submit 50 requests each, all at once, over real
HTTP to one daphne process, with idempotency-key replays and key reuse mixed in.

Every accepted submission exists exactly once per (agent, key), a replay returns
the original's id, a key reused with a different body is refused with 422
`idempotency_key_reused` (whichever body won the race), nothing answers 5xx, and
the audit chain verifies afterwards with contiguous sequence numbers.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db.models import Count

from agents.models import Agent
from agents.services import issue_token
from approvals.models import ApprovalRequest
from audit.chain import verify_chain
from audit.models import AuditEvent
from tests.live import DaphneServer, child_environment

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AGENTS = 20
UNIQUE_KEYS = 40  # per agent: 40 originals + 5 same-body replays + 5 different-body reuses = 50
REPLAYED = range(0, 5)
REUSED = range(5, 10)
CONCURRENCY = 20


def body(key_number: int, *, variant: str = "original") -> dict:
    return {
        "action_type": "update_document",
        "target": {"doc": f"doc-{key_number}"},
        "params": {"text": f"{variant} text {key_number}"},
    }


def workload() -> list[tuple[int, str, dict, str]]:
    """(key number, idempotency key, body, kind) for one agent's 50 submissions."""
    jobs = [(n, f"key-{n}", body(n), "original") for n in range(UNIQUE_KEYS)]
    jobs += [(n, f"key-{n}", body(n), "replay") for n in REPLAYED]
    jobs += [(n, f"key-{n}", body(n, variant="different"), "reuse") for n in REUSED]
    return jobs


@pytest.fixture
def load_server(services_up, django_db_blocker):
    with django_db_blocker.unblock():
        running = DaphneServer(env=child_environment(AGENT_TOKEN_RATE_LIMIT="100000"))
    yield running
    running.stop()


@pytest.fixture
def tokens(people) -> dict[int, str]:
    """Agent id -> bearer secret for the twenty load agents."""
    owner = get_user_model().objects.get(username="owen")
    agents = [Agent.objects.create(name=f"load-{i}", owner=owner) for i in range(AGENTS)]
    return {agent.pk: issue_token(agent).secret for agent in agents}


def test_twenty_agents_times_fifty_submissions_with_duplicates(load_server, tokens):
    events_before = AuditEvent.objects.count()
    gate = asyncio.Semaphore(CONCURRENCY)
    outcomes: list[tuple[int, int, str, str, httpx.Response]] = []  # (agent, key number, key, kind, response)

    async def one(http: httpx.AsyncClient, agent_id: int, secret: str, job: tuple) -> None:
        number, key, payload, kind = job
        async with gate:
            response = await http.post(
                f"{load_server.url}/api/v1/actions/",
                json=payload,
                headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": key},
            )
        outcomes.append((agent_id, number, key, kind, response))

    async def scenario() -> None:
        limits = httpx.Limits(max_connections=CONCURRENCY)
        async with httpx.AsyncClient(timeout=60, limits=limits) as http:
            await asyncio.gather(
                *(one(http, agent_id, secret, job) for agent_id, secret in tokens.items() for job in workload())
            )

    started = time.monotonic()
    asyncio.run(scenario())
    elapsed = time.monotonic() - started

    statuses = Counter(response.status_code for *_, response in outcomes)
    assert len(outcomes) == AGENTS * 50
    assert not [s for s in statuses if s >= 500], statuses
    assert set(statuses) <= {201, 422}, statuses

    by_key: dict[tuple[int, str], list[tuple[str, httpx.Response]]] = defaultdict(list)
    for agent_id, _number, key, kind, response in outcomes:
        by_key[(agent_id, key)].append((kind, response))
    for (agent_id, key), answers in by_key.items():
        accepted = [r for _, r in answers if r.status_code == 201]
        refused = [r for _, r in answers if r.status_code == 422]
        assert accepted, (agent_id, key)
        assert len({r.json()["id"] for r in accepted}) == 1, (agent_id, key)  # replays return the same id
        for r in refused:
            assert r.json()["code"] == "idempotency_key_reused", r.text
        kinds = {kind for kind, _ in answers}
        if "reuse" in kinds:  # two bodies raced for one key: exactly one of them won
            assert len(accepted) == 1 and len(refused) == 1, (agent_id, key, [r.status_code for _, r in answers])
        else:
            assert not refused and len(accepted) == len(answers)
    replays = [
        r
        for *_, kind, r in outcomes
        if kind in {"original", "replay"} and r.headers.get("Idempotent-Replayed") == "true"
    ]
    assert len(replays) >= AGENTS * len(REPLAYED)

    # Exactly one row per (agent, key), and nothing else.
    assert ApprovalRequest.objects.count() == AGENTS * UNIQUE_KEYS
    duplicated = ApprovalRequest.objects.values("agent_id", "idempotency_key").annotate(n=Count("id")).filter(n__gt=1)
    assert not duplicated.exists()

    result = verify_chain()
    assert result.ok, result.reason
    seqs = list(AuditEvent.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert len(seqs) > events_before + AGENTS * UNIQUE_KEYS - 1
    print(
        f"\n{len(outcomes)} submissions in {elapsed:.1f}s ({len(outcomes) / elapsed:.0f}/s), statuses {dict(statuses)}"
    )
