"""The asyncio client: the same operations as ControlPlane, awaited."""

from __future__ import annotations

import asyncio
import functools
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
    Resume,
    action_body,
    action_call,
    backoff_delay,
    call_params,
    claim_body,
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


class AsyncControlPlane(ClientBase[httpx.AsyncBaseTransport]):
    """Like `ControlPlane`, for asyncio code (LangGraph async nodes, async tool functions)."""

    _http: httpx.AsyncClient

    def _open(self, transport: httpx.AsyncBaseTransport | None, **options: Any) -> None:
        self._http = httpx.AsyncClient(transport=transport, **options)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncControlPlane:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(
        self, method: str, path: str, *, read_timeout: float | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        timeout = self._timeout(read_timeout)
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.request(method, path, timeout=timeout, **kwargs)
            except RETRYABLE as exc:
                self._last_attempt(attempt, exc)
            else:
                if self._answer(attempt, response):
                    return raise_for_error(response)
            await asyncio.sleep(backoff_delay(attempt, self.retry_backoff))
        raise AssertionError("unreachable")

    async def submit_action(
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
        """As `ControlPlane.submit_action` (with `reason` and `context`)."""
        return await self._call(
            "POST",
            "/api/v1/actions/",
            json=action_body(action_type, target, params, reason=reason, context=context, **fields),
            headers={"Idempotency-Key": idempotency_key or new_idempotency_key()},
        )

    async def submit_plan_request(
        self,
        path: str,
        plan: str | None = None,
        *,
        title: str | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        text = plan if plan is not None else await asyncio.to_thread(read_plan, path)
        return await self._call(
            "POST",
            "/api/v1/plans/",
            json=plan_body(path, text, title, **fields),
            headers={"Idempotency-Key": idempotency_key or new_idempotency_key()},
        )

    async def get(self, request_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/api/v1/requests/{request_id}/")

    async def find(self, **filters: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = (await self._call("GET", "/api/v1/requests/", params=filters))["results"]
        return found

    async def resume(self, request_id: str, *, wait: float = 0) -> dict[str, Any]:
        return await self._call(
            "GET", f"/api/v1/requests/{request_id}/resume/", params={"wait": wait}, read_timeout=wait + self.timeout
        )

    async def wait(
        self,
        request_id: str,
        *,
        timeout: float | None = None,
        call: SubmittedCall | None = None,
        tool_call_id: str | None = None,
        action_type: str | None = None,
    ) -> Resume:
        """As `ControlPlane.wait`."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            remaining = self.poll_wait if deadline is None else min(self.poll_wait, deadline - loop.time())
            payload = await self.resume(request_id, wait=max(remaining, 0))
            if payload["decided"]:
                return self._checked(
                    payload, request_id=request_id, call=call, tool_call_id=tool_call_id, action_type=action_type
                )
            if deadline is not None and loop.time() >= deadline:
                raise ApprovalTimeout("timeout", f"No decision on {request_id} within {timeout} s.")

    async def cancel(self, request_id: str, reason: str = "") -> dict[str, Any]:
        return await self._call("POST", f"/api/v1/requests/{request_id}/cancel/", json={"reason": reason})

    async def claim(
        self, request_id: str, *, target_hash: str | None = None, nonce: str | None = None
    ) -> dict[str, Any]:
        """Claim an approved execution: the single-use grant with the exact approved params.

        `nonce`: the one the signed grant must bind (hitl_controlplane.grants; a fresh one
        unless given). `hitl_controlplane.handshake` sends its own and verifies the grant.
        """
        return await self._call("POST", f"/api/v1/requests/{request_id}/claim/", json=claim_body(nonce, target_hash))

    async def renew(self, request_id: str, grant_token: str) -> dict[str, Any]:
        """Extend the claim's lease (`{request_id, lease_until}`); `lease_expired` once it ran out."""
        return await self._call("POST", f"/api/v1/requests/{request_id}/renew/", json={"token": grant_token})

    async def complete(
        self, request_id: str, grant_token: str, *, succeeded: bool, result: Any = None, error: str = ""
    ) -> dict[str, Any]:
        return await self._call(
            "POST",
            f"/api/v1/requests/{request_id}/complete/",
            json={"token": grant_token, "succeeded": succeeded, "result": result, "error": error},
        )

    async def request_approval(
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
        key = idempotency_key or new_idempotency_key()
        submitted = await self.submit_action(
            action_type, target, params, idempotency_key=key, reason=reason, context=context, **fields
        )
        call = action_call(action_type, params, idempotency_key=key, tool_call_id=fields.get("tool_call_id"))
        return await self.wait(submitted_id(submitted), timeout=timeout, call=call)

    async def submit_plan(
        self,
        path: str,
        *,
        plan: str | None = None,
        title: str | None = None,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Resume:
        text = plan if plan is not None else await asyncio.to_thread(read_plan, path)
        key = idempotency_key or new_idempotency_key()
        submitted = await self.submit_plan_request(path, text, title=title, idempotency_key=key, **fields)
        call = plan_call(path, text, idempotency_key=key, tool_call_id=fields.get("tool_call_id"))
        return await self.wait(submitted_id(submitted), timeout=timeout, call=call)

    async def submit_suspension(
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
        submitted = await self._call("POST", "/api/v1/suspensions/", json=body, headers={"Idempotency-Key": key})
        return suspension_answer(await self.wait(submitted_id(submitted), timeout=timeout, call=call))

    def require_approval(
        self,
        action_type: str | None = None,
        *,
        target: dict[str, Any] | Callable[..., dict[str, Any]] | None = None,
        timeout: float | None = None,
        claim: bool = True,
    ) -> Callable[[F], F]:
        """As `ControlPlane.require_approval`, for `async def` tool functions."""

        def decorate(fn: F) -> F:
            @functools.wraps(fn)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                params = call_params(fn, args, kwargs)
                resolved_target = target(**params) if callable(target) else (target or {})
                name = action_type or fn.__name__
                key = new_idempotency_key()
                resume = await self.request_approval(
                    name, resolved_target, params, timeout=timeout, idempotency_key=key
                )
                if not resume.approved:
                    raise ApprovalRejected(resume)
                if not claim:
                    return await fn(**resume.params)
                # The one execution handshake: decision, claim, grant, run, complete.
                call = action_call(name, params, idempotency_key=key, tool_call_id=None)
                return await handshake.arun_approved(self, resume, call, fn)

            return wrapper  # type: ignore[return-value]

        return decorate


__all__ = ["AsyncControlPlane"]
