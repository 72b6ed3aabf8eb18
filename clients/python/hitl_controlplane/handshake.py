"""The execution handshake, the only way a helper shipped here runs an approved call.

The public name of `hitl_controlplane.client.handshake` (which the clients' decorators and
the framework helpers use, so it lives beside them): verify the decision, claim with a
fresh nonce, verify the signed grant, run with exactly the granted params while renewing
the lease, complete. See that module for the details.
"""

from .client.handshake import (
    ALREADY_EXECUTED,
    Claimed,
    aclaim_approved,
    arun_approved,
    claim_approved,
    run_approved,
)

__all__ = ["ALREADY_EXECUTED", "Claimed", "aclaim_approved", "arun_approved", "claim_approved", "run_approved"]
