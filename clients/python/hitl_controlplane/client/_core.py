"""What the sync and async clients share: request shapes, results, errors, retry policy."""

from __future__ import annotations

import inspect
import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ..decisions import DecisionRefused, SubmittedCall, payload_sha256, trusted_keys, verify_decision
from ..grants import new_nonce

log = logging.getLogger("hitl_controlplane")
# The server's audit public key(s), `ed25519:...` as `manage.py audit_public_key` prints them.
PUBLIC_KEYS_ENV = "CONTROLPLANE_PUBLIC_KEYS"
# The agent's own name (as the server knows it): decisions must name it.
AGENT_ENV = "CONTROLPLANE_AGENT"

USER_AGENT = "hitl-controlplane-client/1"
FALLBACK_PREFIX = "[Plan submitted for review]"
# Errors worth retrying with the same idempotency key: the request may or may not
# have reached the server, and the key makes the retry safe either way.
RETRYABLE = (httpx.TransportError,)
RETRYABLE_STATUSES = frozenset({502, 503, 504})
TransportT = TypeVar("TransportT", httpx.BaseTransport, httpx.AsyncBaseTransport)


class ControlPlaneError(Exception):
    """The server refused (`code` is the API's stable error code) or could not be reached."""

    def __init__(self, code: str, message: str, *, status: int | None = None, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.details = details


class ApprovalTimeout(ControlPlaneError):
    """No decision arrived within the caller's timeout; the request is still pending."""


@dataclass(frozen=True)
class Resume:
    """A decided request: what to resume the agent with."""

    request_id: str
    state: str
    resume_data: dict[str, Any]
    tool_result: str
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    # The signed decision document once its signature was checked; None when no key is configured.
    decision: dict[str, Any] | None = field(repr=False, default=None)

    @property
    def approved(self) -> bool:
        return bool(self.resume_data.get("action") == "approved")

    @property
    def feedback(self) -> str:
        feedback: str = self.resume_data.get("feedback", "")
        return feedback

    @property
    def reply(self) -> str:
        """A reviewer's reply in place of the tool (`action: responded`): what the model reads instead."""
        message: str = self.resume_data.get("message", "")
        return message

    @property
    def params(self) -> dict[str, Any]:
        """The exact approved params (actions), possibly edited by a reviewer."""
        params: dict[str, Any] = self.resume_data.get("params", {})
        return params

    @classmethod
    def from_payload(cls, payload: dict[str, Any], decision: dict[str, Any] | None = None) -> Resume:
        return cls(
            request_id=payload["request_id"],
            state=payload["state"],
            resume_data=payload["resume_data"],
            tool_result=payload["tool_result"],
            raw=payload,
            decision=decision,
        )

    def check_params(self, params: Any) -> None:
        """Refuse params (a claim's grant) that are not the ones the signed decision approved."""
        if self.decision is not None and payload_sha256(params) != self.decision.get("payload_sha256"):
            raise DecisionRefused(
                f"request {self.request_id}: the params to run are not the ones the signed decision approved"
            )


class ApprovalRejected(ControlPlaneError):
    """The request was rejected (or expired, or was cancelled). `feedback` says why."""

    def __init__(self, resume: Resume) -> None:
        reason = resume.feedback or (
            f"a reviewer replied instead: {resume.reply}" if resume.reply else "no feedback given"
        )
        super().__init__("rejected", f"{resume.state}: {reason}")
        self.resume = resume
        self.feedback = resume.feedback
        self.state = resume.state


def fallback_plan_text(path: str) -> str:
    """What the submit_plan tool returns with no control plane configured (as Mastra's does outside a run)."""
    return f"{FALLBACK_PREFIX} {path}"


def configured_from_env() -> tuple[str, str] | None:
    url, token = os.environ.get("CONTROLPLANE_URL", ""), os.environ.get("CONTROLPLANE_TOKEN", "")
    return (url, token) if url and token else None


def decision_keys(public_keys: Iterable[str | Ed25519PublicKey] | None) -> dict[str, Ed25519PublicKey]:
    """The keys decisions must be signed with: the given ones, else $CONTROLPLANE_PUBLIC_KEYS.

    Raises ValueError for a key that does not parse: a typo must not silently turn checking off.
    """
    if public_keys is None:
        public_keys = os.environ.get(PUBLIC_KEYS_ENV, "").replace(",", " ").split()
    return trusted_keys(public_keys)


_warned_unverified = False


def checked_resume(
    payload: Mapping[str, Any],
    keys: Mapping[str, Ed25519PublicKey],
    *,
    request_id: str,
    call: SubmittedCall | None = None,
    tool_call_id: str | None = None,
    action_type: str | None = None,
) -> Resume:
    """A decided payload as a Resume, its decision_signature checked first when keys are configured.

    `call`: the call this client submitted, as it knows it itself; the signed decision
    must name it (agent, kind, action type, submitted digest, idempotency key, tool-call
    id). Raises DecisionRefused when it does not bind this decision to this call. With
    no key configured nothing can be checked: say so once, loudly, and go on.
    """
    global _warned_unverified
    if not keys:
        if not _warned_unverified:
            _warned_unverified = True
            log.warning(
                "hitl_controlplane: no public key configured (public_keys= or $%s): decisions are "
                "NOT verified, so a forged or replayed approval would be obeyed",
                PUBLIC_KEYS_ENV,
            )
        return Resume.from_payload(dict(payload))
    signed = verify_decision(
        payload, keys, request_id=request_id, call=call, tool_call_id=tool_call_id, action_type=action_type
    )
    return Resume.from_payload(dict(payload), decision=signed)


class AgentPin:
    """Which agent this client acts as: the configured name, else the first verified decision's.

    Configure it (`agent=` or $CONTROLPLANE_AGENT) to refuse another agent's approval
    from the first call on; unconfigured, the first decision whose signature and call
    binding held pins it, and every later decision must name the same agent.
    """

    def __init__(self, agent: str | None) -> None:
        self.name = agent if agent is not None else (os.environ.get(AGENT_ENV) or None)

    def bind(self, call: SubmittedCall) -> SubmittedCall:
        return call.with_agent(self.name)

    def learn(self, resume: Resume) -> None:
        if self.name is None and resume.decision is not None:
            self.name = resume.decision["agent"]["name"]


class ClientBase(Generic[TransportT]):
    """What the sync and async clients both hold and check; each adds its own transport.

    `poll_wait` is how long each long-poll asks the server to hold; `retries` is how
    many times a network error is retried (same idempotency key) before
    ControlPlaneError("network_error") is raised. `public_keys`: the server's keys
    decisions must be signed with (else $CONTROLPLANE_PUBLIC_KEYS); `agent`: this
    agent's name, which every decision must name (else $CONTROLPLANE_AGENT, else the
    name in the first decision that verified for a call this client made).
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        poll_wait: float = 25.0,
        retries: int = 5,
        retry_backoff: float = 0.5,
        timeout: float = 10.0,
        transport: TransportT | None = None,
        public_keys: Iterable[str] | None = None,
        agent: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.poll_wait = poll_wait
        self.retries = retries
        self.retry_backoff = retry_backoff
        self.timeout = timeout
        # Resumes are checked against these before anything runs (DecisionRefused otherwise).
        self.decision_keys = decision_keys(public_keys)
        # The agent decisions must name (`agent=`, $CONTROLPLANE_AGENT, else the first verified one's).
        self.agent = AgentPin(agent)
        self._open(
            transport,
            base_url=self.url,
            timeout=timeout,
            follow_redirects=False,  # a bearer token must not follow a redirect elsewhere
            headers={"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT},
        )

    def _open(self, transport: TransportT | None, **options: Any) -> None:
        """Open this client's httpx client (sync or async) with these options."""
        raise NotImplementedError

    def _timeout(self, read_timeout: float | None) -> httpx.Timeout:
        return httpx.Timeout(self.timeout, read=read_timeout or self.timeout)

    def _last_attempt(self, attempt: int, exc: Exception) -> None:
        """Raise ControlPlaneError("network_error") once the retries are spent."""
        if attempt == self.retries:
            raise ControlPlaneError("network_error", f"{type(exc).__name__}: {exc}") from exc

    def _answer(self, attempt: int, response: httpx.Response) -> bool:
        """Whether `response` is the answer (else retry: a gateway error with retries left)."""
        return response.status_code not in RETRYABLE_STATUSES or attempt == self.retries

    def _checked(
        self,
        payload: Mapping[str, Any],
        *,
        request_id: str,
        call: SubmittedCall | None,
        tool_call_id: str | None,
        action_type: str | None,
    ) -> Resume:
        """The submitted-call check of a decided payload: its signature, and that it names
        the call this client made (`call`) as this client's agent, which it then pins."""
        resume = checked_resume(
            payload,
            self.decision_keys,
            request_id=request_id,
            call=self.agent.bind(call) if call is not None else None,
            tool_call_id=tool_call_id,
            action_type=action_type,
        )
        if call is not None:
            self.agent.learn(resume)
        return resume


def action_call(
    action_type: str, params: dict[str, Any] | None, *, idempotency_key: str, tool_call_id: str | None
) -> SubmittedCall:
    """The SubmittedCall of an action as `action_body` sends it."""
    return SubmittedCall.action(
        action_type, params or {}, idempotency_key=idempotency_key, tool_call_id=tool_call_id or ""
    )


def plan_call(path: str, plan: str, *, idempotency_key: str, tool_call_id: str | None) -> SubmittedCall:
    """The SubmittedCall of a plan as `plan_body` sends it."""
    return SubmittedCall.plan(path, plan, idempotency_key=idempotency_key, tool_call_id=tool_call_id or "")


def submitted_id(answer: Mapping[str, Any]) -> str:
    """The request id a submission answer names, as a UUID's text. Not trusted: the signed
    decision must still name the call this client made; this only keeps a rewritten
    answer from steering the next request's URL anywhere but a request's."""
    try:
        return str(uuid.UUID(str(answer["id"])))
    except (KeyError, TypeError, ValueError):
        raise DecisionRefused(f"the submission answer names no request id ({answer.get('id')!r})") from None


def new_idempotency_key() -> str:
    return f"cpc-{uuid.uuid4()}"


def raise_for_error(response: httpx.Response) -> dict[str, Any]:
    """The JSON body of a success, or ControlPlaneError with the API's code."""
    try:
        body: dict[str, Any] = response.json()
    except ValueError:
        body = {}
    if response.is_success:
        return body
    raise ControlPlaneError(
        body.get("code", f"http_{response.status_code}"),
        body.get("message", response.reason_phrase),
        status=response.status_code,
        details=body.get("details"),
    )


def claim_body(nonce: str | None, target_hash: str | None) -> dict[str, Any]:
    """A claim's JSON: the nonce the signed grant must bind (a fresh one unless given)."""
    return {"nonce": nonce or new_nonce(), **({"target_hash": target_hash} if target_hash else {})}


def suspension_call(
    action_type: str | None,
    workflow_id: str | None,
    step_id: str | None,
    suspend_payload: dict[str, Any],
    *,
    idempotency_key: str,
    tool_call_id: str | None,
) -> SubmittedCall:
    """The SubmittedCall of a suspension: its action type as the server names it
    (the one given, else `<workflow_id>.<step_id>`) and its suspend payload."""
    name = action_type or (f"{workflow_id}.{step_id}" if workflow_id and step_id else "")
    if not name:
        raise ValueError("a suspension needs action_type, or workflow_id and step_id")
    return SubmittedCall.suspension(name, suspend_payload, idempotency_key=idempotency_key, tool_call_id=tool_call_id)


def suspension_answer(resume: Resume) -> Any:
    """The reviewers' answer to a suspension, exactly as the server validated it against the
    schema; ApprovalRejected (with the feedback) when it was rejected, expired or cancelled."""
    if resume.resume_data is None:
        feedback = str(resume.raw.get("feedback") or "")
        raise ApprovalRejected(
            Resume(
                request_id=resume.request_id,
                state=resume.state,
                resume_data={"action": "rejected", **({"feedback": feedback} if feedback else {})},
                tool_result=resume.tool_result,
                raw=resume.raw,
                decision=resume.decision,
            )
        )
    return resume.resume_data


def action_body(
    action_type: str, target: dict[str, Any] | None, params: dict[str, Any] | None, **fields: Any
) -> dict[str, Any]:
    """The submission's JSON; fields left empty (None, "", {}) are not sent."""
    body = {"action_type": action_type, "target": target or {}, "params": params or {}}
    body.update({k: v for k, v in fields.items() if v not in (None, "", {})})
    return body


def plan_body(path: str, plan: str, title: str | None, **fields: Any) -> dict[str, Any]:
    body = {"path": path, "plan": plan, **({"title": title} if title else {})}
    body.update({k: v for k, v in fields.items() if v not in (None, "", {})})
    return body


def read_plan(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def call_params(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The function's arguments by name, defaults applied: the params reviewers see."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def backoff_delay(attempt: int, base: float) -> float:
    return min(base * (2.0**attempt), 10.0)


def jsonable(value: Any) -> Any:
    """`value` if it serializes as JSON, else its repr (for reporting a tool's result)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value
