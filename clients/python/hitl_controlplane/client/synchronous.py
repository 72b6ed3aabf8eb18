"""The blocking client."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from ..decisions import SubmittedCall
from . import handshake
from ._core import (
    RETRYABLE,
    ApprovalRejected,
    ApprovalTimeout,
    ClientBase,
    ControlPlaneError,
    Resume,
    action_body,
    action_call,
    backoff_delay,
    call_params,
    claim_body,
    configured_from_env,
    fallback_plan_text,
    new_idempotency_key,
    plan_body,
    plan_call,
    raise_for_error,
    read_plan,
    submitted_id,
    suspension_answer,
    suspension_call,
)

F = TypeVar("F", bound=Callable[..., Any])


class ControlPlane(ClientBase[httpx.BaseTransport]):
    """A connection to the control plane as one agent (its bearer token); the options are
    `ClientBase`'s."""

    _http: httpx.Client

    def _open(self, transport: httpx.BaseTransport | None, **options: Any) -> None:
        self._http = httpx.Client(transport=transport, **options)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- transport --------------------------------------------------------------------

    def _call(self, method: str, path: str, *, read_timeout: float | None = None, **kwargs: Any) -> dict[str, Any]:
        timeout = self._timeout(read_timeout)
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, path, timeout=timeout, **kwargs)
            except RETRYABLE as exc:
                self._last_attempt(attempt, exc)
            else:
                if self._answer(attempt, response):
                    return raise_for_error(response)
            time.sleep(backoff_delay(attempt, self.retry_backoff))
        raise AssertionError("unreachable")

    # --- requests -----------------------------------------------------------------------

    def submit_action(
        self,
        action_type: str,
        target: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        reason: str | None = None,
        context: dict[str, Any] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Submit a tool call; returns the request as the API shows it (`id`, `state`, `rule`, ...).

        `reason`: why the agent wants this, in plain text; `context`: `{"links": [{"label", "url"}],
        "turns": [{"role", "text"}]}` (the run or thread, the last few conversation turns). Reviewers
        see both labelled as the agent's own claim. `fields`: run_id, thread_id, resource_id,
        tool_call_id, declared, callback_url, allowed_decisions, batch_id.
        """
        return self._call(
            "POST",
            "/api/v1/actions/",
            json=action_body(action_type, target, params, reason=reason, context=context, **fields),
            headers={"Idempotency-Key": idempotency_key or new_idempotency_key()},
        )

    def submit_plan_request(
        self,
        path: str,
        plan: str | None = None,
        *,
        title: str | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Submit a plan (read from `path` unless `plan` is given); returns the request."""
        text = plan if plan is not None else read_plan(path)
        return self._call(
            "POST",
            "/api/v1/plans/",
            json=plan_body(path, text, title, **fields),
            headers={"Idempotency-Key": idempotency_key or new_idempotency_key()},
        )

    def get(self, request_id: str) -> dict[str, Any]:
        return self._call("GET", f"/api/v1/requests/{request_id}/")

    def find(self, **filters: str) -> list[dict[str, Any]]:
        """The agent's requests matching `filters` (idempotency_key, run_id, tool_call_id, state, ...)."""
        found: list[dict[str, Any]] = self._call("GET", "/api/v1/requests/", params=filters)["results"]
        return found

    def resume(self, request_id: str, *, wait: float = 0) -> dict[str, Any]:
        """One long-poll: the resume payload, `decided` false if nothing was decided within `wait`."""
        return self._call(
            "GET", f"/api/v1/requests/{request_id}/resume/", params={"wait": wait}, read_timeout=wait + self.timeout
        )

    def wait(
        self,
        request_id: str,
        *,
        timeout: float | None = None,
        call: SubmittedCall | None = None,
        tool_call_id: str | None = None,
        action_type: str | None = None,
    ) -> Resume:
        """Block until the request is decided (ApprovalTimeout after `timeout` seconds).

        `call`: the call this client submitted (`hitl_controlplane.decisions.SubmittedCall`);
        the signed decision must name it, and this client's agent, or DecisionRefused.
        `request_approval`, `submit_plan` and the framework helpers always pass it; a host
        that found its request again (by idempotency key) builds it from what it submitted.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = self.poll_wait if deadline is None else min(self.poll_wait, deadline - time.monotonic())
            payload = self.resume(request_id, wait=max(remaining, 0))
            if payload["decided"]:
                return self._checked(
                    payload, request_id=request_id, call=call, tool_call_id=tool_call_id, action_type=action_type
                )
            if deadline is not None and time.monotonic() >= deadline:
                raise ApprovalTimeout("timeout", f"No decision on {request_id} within {timeout} s.")

    def cancel(self, request_id: str, reason: str = "") -> dict[str, Any]:
        return self._call("POST", f"/api/v1/requests/{request_id}/cancel/", json={"reason": reason})

    def claim(self, request_id: str, *, target_hash: str | None = None, nonce: str | None = None) -> dict[str, Any]:
        """Claim an approved execution: the single-use grant with the exact approved params.

        `nonce`: the one the signed grant must bind (hitl_controlplane.grants; a fresh one
        unless given). `hitl_controlplane.handshake` sends its own and verifies the grant.
        """
        return self._call("POST", f"/api/v1/requests/{request_id}/claim/", json=claim_body(nonce, target_hash))

    def renew(self, request_id: str, grant_token: str) -> dict[str, Any]:
        """Extend the claim's lease (`{request_id, lease_until}`); `lease_expired` once it ran out."""
        return self._call("POST", f"/api/v1/requests/{request_id}/renew/", json={"token": grant_token})

    def complete(
        self, request_id: str, grant_token: str, *, succeeded: bool, result: Any = None, error: str = ""
    ) -> dict[str, Any]:
        return self._call(
            "POST",
            f"/api/v1/requests/{request_id}/complete/",
            json={"token": grant_token, "succeeded": succeeded, "result": result, "error": error},
        )

    # --- blocking helpers ------------------------------------------------------------------

    def request_approval(
        self,
        action_type: str,
        target: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        reason: str | None = None,
        context: dict[str, Any] | None = None,
        **fields: Any,
    ) -> Resume:
        """Submit a tool call and wait for the decision. Check `.approved`; use `.params`.

        `reason` and `context` travel with it (see `submit_action`)."""
        key = idempotency_key or new_idempotency_key()
        submitted = self.submit_action(
            action_type, target, params, idempotency_key=key, reason=reason, context=context, **fields
        )
        # Bound to the call as this client made it, not to anything the answer says.
        call = action_call(action_type, params, idempotency_key=key, tool_call_id=fields.get("tool_call_id"))
        return self.wait(submitted_id(submitted), timeout=timeout, call=call)

    def submit_plan(
        self,
        path: str,
        *,
        plan: str | None = None,
        title: str | None = None,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Resume:
        """Mastra's submit_plan: read the plan at `path`, submit it, wait for the decision.

        `resume.tool_result` is the text for the model; `resume.resume_data` is
        `{action, feedback?, path, title, plan}`, what `agent.resumeStream()` takes.
        """
        text = plan if plan is not None else read_plan(path)
        key = idempotency_key or new_idempotency_key()
        submitted = self.submit_plan_request(path, text, title=title, idempotency_key=key, **fields)
        call = plan_call(path, text, idempotency_key=key, tool_call_id=fields.get("tool_call_id"))
        return self.wait(submitted_id(submitted), timeout=timeout, call=call)

    def submit_suspension(
        self,
        title: str,
        suspend_payload: dict[str, Any],
        resume_schema: dict[str, Any],
        *,
        action_type: str | None = None,
        workflow_id: str | None = None,
        step_id: str | None = None,
        summary: str | None = None,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Any:
        """A workflow step's `suspend()`: submit it, wait, and return the reviewers' answer.

        The answer is exactly what the server validated against `resume_schema` (pass it to
        `run.resume({step, resumeData})`); its signed decision must name this suspension.
        Raises ApprovalRejected (with the feedback) when it was rejected, expired or
        cancelled, DecisionRefused when the decision does not verify. `fields`: run_id,
        thread_id, resource_id, tool_call_id, callback_url.
        """
        key = idempotency_key or new_idempotency_key()
        body = {"title": title, "suspend_payload": suspend_payload, "resume_schema": resume_schema}
        optional = dict(action_type=action_type, workflow_id=workflow_id, step_id=step_id, summary=summary, **fields)
        body.update({k: v for k, v in optional.items() if v not in (None, "")})
        call = suspension_call(
            action_type,
            workflow_id,
            step_id,
            suspend_payload,
            idempotency_key=key,
            tool_call_id=fields.get("tool_call_id"),
        )
        submitted = self._call("POST", "/api/v1/suspensions/", json=body, headers={"Idempotency-Key": key})
        return suspension_answer(self.wait(submitted_id(submitted), timeout=timeout, call=call))

    def require_approval(
        self,
        action_type: str | None = None,
        *,
        target: dict[str, Any] | Callable[..., dict[str, Any]] | None = None,
        timeout: float | None = None,
        claim: bool = True,
    ) -> Callable[[F], F]:
        """Decorate a tool function so it runs only when approved, with the approved params.

        The call's arguments (by name) are the params reviewers see; the function
        then runs with the approved, possibly edited, params. With `claim` (the
        default) the execution is claimed first (re-validated on the server, at
        most once) and its outcome reported. Raises ApprovalRejected with the
        feedback when rejected, expired or cancelled.
        """

        def decorate(fn: F) -> F:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                params = call_params(fn, args, kwargs)
                resolved_target = target(**params) if callable(target) else (target or {})
                name = action_type or fn.__name__
                key = new_idempotency_key()
                resume = self.request_approval(name, resolved_target, params, timeout=timeout, idempotency_key=key)
                if not resume.approved:
                    raise ApprovalRejected(resume)
                if not claim:
                    return fn(**resume.params)
                # The one execution handshake: decision, claim, grant, run, complete.
                call = action_call(name, params, idempotency_key=key, tool_call_id=None)
                return handshake.run_approved(self, resume, call, fn)

            return wrapper  # type: ignore[return-value]

        return decorate


def submit_plan(path: str, *, client: ControlPlane | None = None, timeout: float | None = None) -> str:
    """The `submit_plan` tool for agent frameworks: returns the text the model reads.

    With no client given and no CONTROLPLANE_URL / CONTROLPLANE_TOKEN in the
    environment it returns the readable fallback "[Plan submitted for review] <path>",
    as Mastra's tool does outside an agent run.
    """
    if client is None:
        configured = configured_from_env()
        if configured is None:
            return fallback_plan_text(path)
        with ControlPlane(*configured) as env_client:
            return env_client.submit_plan(path, timeout=timeout).tool_result
    return client.submit_plan(path, timeout=timeout).tool_result


__all__ = ["ApprovalRejected", "ApprovalTimeout", "ControlPlane", "ControlPlaneError", "Resume", "submit_plan"]
