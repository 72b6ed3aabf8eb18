"""Shared pieces of the benchmarks: a fresh database, a daphne process, a concurrent
load generator and the result format.

Every benchmark compares against a baseline measured in the same run on the same
machine and reports the ratio beside the absolute numbers; none asserts a time.
Each `bench_*.py` prints one JSON document as its last stdout line:
{"benchmark": name, "results": [Result.as_dict(), ...]}.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from controlplane.keys import use_ephemeral_keys

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
BENCH_DB = os.environ.get("BENCH_DB", "cp_bench")
SMOKE = "--smoke" in sys.argv


@dataclass
class Result:
    metric: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    target: str = ""
    details: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        return round(self.value / self.baseline, 3)

    def as_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}


def emit(benchmark: str, results: list[Result]) -> None:
    print(json.dumps({"benchmark": benchmark, "smoke": SMOKE, "results": [r.as_dict() for r in results]}))


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- database and processes ---------------------------------------------------


def bench_database_url() -> str:
    return f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}"


def bench_env(**extra: str) -> dict[str, str]:
    # One set of keys for every process of the run: a session made here must verify in daphne.
    use_ephemeral_keys()
    env = dict(os.environ)
    env.update(
        DATABASE_URL=bench_database_url(),
        DJANGO_SETTINGS_MODULE="tests.perf.settings",
        REDIS_URL=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/12"),
        AGENT_TOKEN_RATE_LIMIT="100000000",
        CONTROLPLANE_VAR_DIR=os.environ.get("CONTROLPLANE_VAR_DIR", str(ROOT / "var" / "bench")),
        **extra,
    )
    Path(env["CONTROLPLANE_VAR_DIR"]).mkdir(parents=True, exist_ok=True)
    return env


def fresh_database() -> None:
    """Drop and recreate the benchmark database and migrate it."""
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')
    manage("migrate", "--no-input", "-v", "0")


def manage(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=bench_env(), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def django_setup() -> None:
    """Use Django in this process, on the benchmark database."""
    os.environ.update(bench_env())
    import django

    django.setup()


class Server:
    """daphne on the benchmark database, on a free port."""

    def __init__(self) -> None:
        from tests.live import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        log = open(Path(bench_env()["CONTROLPLANE_VAR_DIR"]) / f"daphne-{self.port}.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "controlplane.asgi:application"],
            cwd=ROOT,
            env=bench_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self._wait()

    def _wait(self) -> None:
        import urllib.request

        for _ in range(150):
            try:
                urllib.request.urlopen(f"{self.url}/healthz", timeout=1).read()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("daphne did not start")

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(timeout=15)


# --- load generation ------------------------------------------------------------


@dataclass
class LoadResult:
    requests: int
    seconds: float
    statuses: dict[int, int]
    latencies_ms: list[float]

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    def summary(self) -> dict:
        return {
            "requests": self.requests,
            "seconds": round(self.seconds, 3),
            "statuses": self.statuses,
            "p50_ms": round(statistics.median(self.latencies_ms), 2),
            "p99_ms": round(self.percentile(99), 2),
        }


async def post_concurrently(url: str, bodies: list[dict], *, headers: dict, concurrency: int) -> LoadResult:
    """POST every body with `concurrency` clients at once (a real async HTTP load)."""
    import httpx

    queue: asyncio.Queue = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=60) as client:

        async def worker() -> None:
            while not queue.empty():
                body = queue.get_nowait()
                started = time.perf_counter()
                response = await client.post(url, json=body)
                latencies.append((time.perf_counter() - started) * 1000)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return LoadResult(len(bodies), elapsed, statuses, latencies)


# --- bulk data --------------------------------------------------------------------


# A realistic mix of audit events: a request's life (submitted, queued, decided,
# approved, claimed) by agents, the system and reviewers, plus policy changes.
_AUDIT_VERBS = (
    ("request.submitted", "agent"),
    ("request.queued", "system"),
    ("decision.recorded", "user"),
    ("request.approved", "system"),
    ("request.execution_claimed", "agent"),
    ("policy.changed", "user"),
)


def fill_audit_chain(rows: int, *, start: datetime.datetime | None = None, batch: int = 50_000) -> None:
    """Append `rows` events to the audit log, continuing its hash chain, through COPY.

    Each row is built as audit.chain builds it (event_document, canonical JSON,
    sha256 over prev_hash + canonical), so `audit_verify` and the offline verifier
    accept the result; only the ORM and the advisory lock per append are skipped,
    which made the fill through record() cost ~600 µs a row (~35 µs here). Run it
    with nothing else appending. Sequential by nature: each hash needs the previous.
    Rows are signed like the server's (audit.signing): about a third of the fill's time.
    """
    from django.db import connection

    from audit.chain import head
    from audit.signing import signer
    from hitl_controlplane.canonical import chain_hash, event_document, format_timestamp

    # canonical_bytes() without its type walk (these values are str, int and None
    # only): the same json.dumps options, so the same bytes; --smoke verifies the chain.
    encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
    start = start or datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    columns = (
        "seq",
        "occurred_at",
        "actor_kind",
        "actor_id",
        "actor_label",
        "verb",
        "request_id",
        "agent_id",
        "metadata",
        "prev_hash",
        "hash",
        "canonical",
        "key_id",
        "signature",
    )
    key = signer().current
    first, prev_hash = head()
    first += 1
    connection.ensure_connection()
    for offset in range(first, first + rows, batch):
        with (
            connection.connection.cursor() as cursor,
            cursor.copy(f"COPY audit_auditevent ({', '.join(columns)}) FROM STDIN") as copy,
        ):
            for seq in range(offset, min(first + rows, offset + batch)):
                verb, kind = _AUDIT_VERBS[seq % len(_AUDIT_VERBS)]
                request = seq // len(_AUDIT_VERBS)
                request_id = None if verb == "policy.changed" else str(uuid.UUID(int=request + 1))
                agent_id = None if request_id is None else request % 50 + 1
                actor_id, label = {
                    "agent": (str(agent_id), f"agent-{agent_id}"),
                    "user": (str(request % 7 + 1), f"reviewer{request % 7}"),
                    "system": ("", "system"),
                }[kind]
                metadata = {"n": seq, "params": {"hmac": f"{seq:064x}", "size": 1234}, "note": "benchmark row"}
                occurred = format_timestamp(start + datetime.timedelta(milliseconds=seq * 250))
                canonical = encode(
                    event_document(
                        seq=seq,
                        occurred_at=occurred,
                        actor_kind=kind,
                        actor_id=actor_id,
                        actor_label=label,
                        verb=verb,
                        request_id=request_id,
                        agent_id=agent_id,
                        metadata=metadata,
                    )
                )
                row_hash = chain_hash(prev_hash, canonical.encode())
                copy.write_row(
                    (
                        seq,
                        occurred,
                        kind,
                        actor_id,
                        label,
                        verb,
                        request_id,
                        agent_id,
                        encode(metadata),
                        prev_hash,
                        row_hash,
                        canonical,
                        key.key_id,
                        key.sign(row_hash),
                    )
                )
                prev_hash = row_hash
    # The append keeps the Merkle tree; a fill that bypasses it brings the tree along here,
    # so no measured request pays for catching it up.
    from audit.tree import catch_up

    catch_up()
