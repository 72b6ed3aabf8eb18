"""Run the whole stack in the foreground: daphne, a Celery worker, Celery beat and
the demo agent. One Ctrl-C (or SIGTERM) stops them all, in reverse order. Daphne
starts first; the others once it answers /readyz (their pushes need it listening).

`make run` calls this after migrating and seeding. Without REDIS_URL it is the
embedded deployment: SQLite, the filesystem broker in VAR_DIR/broker, and the
loopback channel relay (every child but daphne gets CHANNEL_RELAY_URL). With
REDIS_URL and DATABASE_URL the same processes run on Redis and PostgreSQL.

Each child runs in its own session, so a terminal's Ctrl-C reaches only this
supervisor, which then shuts the children down in order; on Linux each child is
also told to exit if the supervisor dies (PR_SET_PDEATHSIG). If any child exits
on its own, the rest are stopped and the command fails: a half-running stack is
worse than none.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

ROOT = Path(settings.BASE_DIR)
STOP_TIMEOUT_SECONDS = 10.0
PRUNE_EVERY_SECONDS = 60.0
PROCESSED_MESSAGE_TTL_SECONDS = 600.0


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.argv,
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Command(BaseCommand):
    help = "Run daphne, a Celery worker, Celery beat and the demo agent until Ctrl-C."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--concurrency", type=int, default=2, help="Worker processes.")
        parser.add_argument("--no-demo-agent", action="store_true", help="Do not start the demo agent.")
        parser.add_argument(
            "--no-witness", action="store_true", help="Do not start the local witness (AUDIT_WITNESSES unset only)."
        )

    def handle(
        self, *args, host: str, port: int, concurrency: int, no_demo_agent: bool, no_witness: bool, **options
    ) -> None:
        python = sys.executable
        embedded = not settings.REDIS_URL
        base_env = dict(os.environ, DJANGO_SETTINGS_MODULE="controlplane.settings", PYTHONUNBUFFERED="1")
        # One local witness (audit_local_witness) so the demo's checkpoints read "witnessed",
        # unless witnesses are configured (real ones run elsewhere, docs/audit.md "Witnesses").
        local_witness = not no_witness and not os.environ.get("AUDIT_WITNESSES")
        if local_witness:
            from audit.management.commands.audit_local_witness import local_vkey

            base_env["AUDIT_WITNESSES"] = local_vkey()
        base_env.pop("CHANNEL_RELAY_URL", None)
        loopback = "127.0.0.1" if host in ("0.0.0.0", "127.0.0.1", "localhost") else host
        url = f"http://{loopback}:{port}"
        relayed_env = dict(base_env, CHANNEL_RELAY_URL=url) if embedded else base_env
        schedule = Path(settings.VAR_DIR) / "celerybeat-schedule"
        # Celery logs warnings only: the demo agent's lines tell the story, and every
        # outcome is on the request and in the audit log.
        # --quiet (celery's own, before the subcommand): no startup banners, which buried
        # the ready banner and its sign-in lines under some forty lines of ASCII art.
        worker_argv = [
            python,
            "-m",
            "celery",
            "-A",
            "controlplane",
            "--quiet",
            "worker",
            "--loglevel=WARNING",
            f"--concurrency={concurrency}",
            "-n",
            f"worker-{os.getpid()}@%h",
        ]
        if embedded:
            # No fanout chatter over the filesystem broker: one worker per machine here.
            worker_argv += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        children = [
            Child(
                "web",
                [
                    python,
                    "-m",
                    "daphne",
                    "-b",
                    host,
                    "-p",
                    str(port),
                    "--access-log",
                    str(Path(settings.VAR_DIR) / "access.log"),
                    "controlplane.asgi:application",
                ],
                base_env,
            ),
        ]
        # Everything that pushes to reviewers' screens starts once the web server answers
        # /readyz. In the embedded stack a push is a POST to daphne's relay, delivered at
        # most once: on a warm start the worker picks up queued tasks and beat fires its
        # sweeps at once, and a push sent before daphne listens is refused and lost
        # ("channel relay ... Connection refused"). Queued work waits in the broker.
        after_ready = [
            Child("worker", worker_argv, relayed_env),
            Child(
                "beat",
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "controlplane",
                    "--quiet",
                    "beat",
                    "--loglevel=WARNING",
                    "-s",
                    str(schedule),
                ],
                relayed_env,
            ),
        ]
        if not no_demo_agent:
            after_ready.append(Child("demo-agent", [python, "manage.py", "demo_agent"], relayed_env))
        if local_witness:
            witness_argv = [python, "manage.py", "audit_local_witness", "--url", url]
            after_ready.append(Child("witness", witness_argv, relayed_env))

        stopping = False

        def request_stop(signum, frame) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)

        mode = "embedded (SQLite, filesystem broker, loopback channel relay)" if embedded else "Redis"
        self.stdout.write(f"Starting the stack ({mode}) ...")
        for child in children:
            child.start()
        failed: Child | None = None
        announced = False
        last_prune = 0.0
        try:
            while not stopping:
                failed = next((child for child in children if not child.running), None)
                if failed is not None:
                    break
                if not announced and _ready(url):
                    announced = True
                    for child in after_ready:
                        child.start()
                        children.append(child)
                    self.stdout.write(self.style.SUCCESS(ready_banner(url, embedded=embedded)))
                if embedded and time.monotonic() - last_prune > PRUNE_EVERY_SECONDS:
                    last_prune = time.monotonic()
                    _prune_processed_messages()
                time.sleep(0.3)
        finally:
            self._stop(children)
        if failed is not None:
            status = failed.process.returncode if failed.process is not None else None
            raise CommandError(f"{failed.name} exited with status {status}; stopped the rest.")
        self.stdout.write("Stopped.")

    def _stop(self, children: list[Child]) -> None:
        for child in reversed(children):
            if child.running and child.process is not None:  # running implies a process; said for mypy
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        for child in reversed(children):
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stderr.write(f"{child.name} did not stop in time; killing it.")
                child.process.kill()
                child.process.wait()


def ready_banner(url: str, *, embedded: bool) -> str:
    """What `make run` prints once the stack answers: where to go, and where the key
    that verifies audit exports is (docs/audit.md "Verifying an export")."""
    from audit.signing import signer

    key = signer().current
    rule = "-" * 72
    return (
        f"\n{rule}\nReady: {url}/  (login {url}/login/, admin {url}/admin/, readiness {url}/readyz)\n"
        "Sign in as `reviewer` (the queue), `risk-admin` (rules) or `auditor` (the audit log).\n"
        "Their passwords were printed above on the first start; on a warm start, or if they\n"
        "scrolled away: `python manage.py demo_credentials` (new ones, printed again).\n"
        f"Audit exports verify offline with the public key {key.public_text} (key id {key.key_id}):\n"
        f"  hitl-audit-verify EXPORT.jsonl --public-key {key.public_text}\n"
        f'  The same key is on {url}/audit/ ("Events are signed with key") and from '
        f"`python manage.py audit_public_key`; see docs/audit.md.\n"
        + (f"For ad-hoc commands against this stack: export CHANNEL_RELAY_URL={url}\n" if embedded else "")
        + f"Press Ctrl-C to stop everything.\n{rule}\n"
    )


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _prune_processed_messages() -> None:
    """The filesystem broker keeps each taken message (its atomic claim); drop old ones."""
    folder = Path(settings.BROKER_DIR) / "processed"
    cutoff = time.time() - PROCESSED_MESSAGE_TTL_SECONDS
    for path in folder.glob("*.msg"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass
