"""Every state change of an approval request, one function each.

Views, API views, consumers, tasks and commands call these and nothing else changes
a request's state. The package, by area:

- `core`: fetch-and-lock (`changing`), the transition table's one mover
  (`transition`), refusals that keep what they wrote (`PersistedRefusal`), and the
  domain signal sent on commit (`request_changed`);
- `guards` and `step_up`: every check a decision meets, under the row lock;
- `submission`: an agent's submission, classified into its first state;
- `decisions`: approve, reject, batches, withdrawal;
- `edits`: approve with edits (a new revision, re-classified);
- `votes`: the vote every decision records, and the approval once the quorum stands;
- `suspensions`: a reviewer's typed answer to a paused workflow step;
- `deadlines`: expiries, the sweeper, deadline extensions;
- `execution`: re-validation, run-once grants, outcomes and retries;
- `leases`: the signed grant, lease renewals and reports after the lease ran out;
- `escalation`: quorum reachability, escalation, regrouping after an edit;
- `reveal`: a masked param shown to a reviewer who may decide, each time audited.
"""

from ..people import Person
from .classification import classification_input
from .core import SYSTEM, PersistedRefusal, RequestChange, RequestId, request_changed
from .deadlines import expire, expire_overdue, extend_decision_deadline
from .edits import approve_with_edits, edit_decision, is_proposal
from .escalation import escalate_request
from .execution import (
    ExecutionGrant,
    claim_execution,
    complete_execution,
    defer_execution,
    fail_lost_execution,
    mark_enqueued,
    reclaim_execution,
    release_enqueue,
    revalidate,
    revalidation_refusal,
    server_executor,
)
from .leases import renew_execution
from .replies import respond_instead
from .reveal import Revealed, allow_masked_probe, may_reveal, reveal_field
from .reviewer_decisions import BatchItem, approve, cancel, decide_batch, reject
from .step_up import StepUpProof, decision_digest, method_for, needs_step_up, payload_digest
from .submission import PLAN_ACTION_TYPE, Submission, classify, submit
from .suspensions import answer_decision, answer_of, respond_to_suspension
from .votes import require_revision_given

__all__ = [
    "PLAN_ACTION_TYPE",
    "SYSTEM",
    "BatchItem",
    "ExecutionGrant",
    "PersistedRefusal",
    "RequestChange",
    "RequestId",
    "Person",
    "StepUpProof",
    "Submission",
    "approve",
    "answer_decision",
    "answer_of",
    "approve_with_edits",
    "cancel",
    "claim_execution",
    "classification_input",
    "classify",
    "complete_execution",
    "decide_batch",
    "decision_digest",
    "edit_decision",
    "defer_execution",
    "escalate_request",
    "expire",
    "expire_overdue",
    "extend_decision_deadline",
    "fail_lost_execution",
    "is_proposal",
    "mark_enqueued",
    "method_for",
    "needs_step_up",
    "payload_digest",
    "reclaim_execution",
    "renew_execution",
    "reject",
    "require_revision_given",
    "respond_instead",
    "reveal_field",
    "allow_masked_probe",
    "may_reveal",
    "Revealed",
    "release_enqueue",
    "request_changed",
    "respond_to_suspension",
    "revalidate",
    "revalidation_refusal",
    "server_executor",
    "submit",
]
