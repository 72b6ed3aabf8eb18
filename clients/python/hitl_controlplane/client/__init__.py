"""Python client for the HITL control plane. Imports nothing from Django.

    from hitl_controlplane.client import ControlPlane

    cp = ControlPlane("https://controlplane.example.com", token="cp_...")
    resume = cp.submit_plan(".plans/auth.md")          # blocks until a person decides
    print(resume.tool_result)                           # what the model should read

    @cp.require_approval("transfer_funds")
    def transfer(amount: int, to: str) -> str: ...      # runs only once approved

Configure the server's public key (`manage.py audit_public_key`) with
`public_keys=[...]` or $CONTROLPLANE_PUBLIC_KEYS: every decision's signature is then
checked before anything runs, and a forged, replayed or altered one raises
DecisionRefused. `AsyncControlPlane` is the same with `await`. Network errors are retried with
the same idempotency key, so a retried submission never creates a second request.
"""

from ..decisions import DecisionRefused
from ._core import (
    ApprovalRejected,
    ApprovalTimeout,
    ControlPlaneError,
    Resume,
    fallback_plan_text,
)
from .asynchronous import AsyncControlPlane
from .synchronous import ControlPlane, submit_plan

__all__ = [
    "ApprovalRejected",
    "ApprovalTimeout",
    "AsyncControlPlane",
    "ControlPlane",
    "ControlPlaneError",
    "DecisionRefused",
    "Resume",
    "fallback_plan_text",
    "submit_plan",
]
