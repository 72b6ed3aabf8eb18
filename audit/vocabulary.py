"""The registered audit event vocabulary.

Every audit row's verb is a stable dotted name registered here with its facts (as
Sentry's audit_log registry does): a description, the phase of a request's life it
belongs to on the timeline (`PHASE_NAMES`, or none), and whether it records a move of
the state machine (`approvals.states.TRANSITIONS` names these verbs). Everything else
(`TRANSITION_VERBS`, `PHASES`, `phase_of`) is derived from the registrations, so a fact
is said once. Verbs are never renamed or reused: rows written years ago must still mean
what they meant. Registering a duplicate raises. A golden test
(tests/audit/test_vocabulary.py) pins the list, the phases and the transitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "PHASES",
    "PHASE_NAMES",
    "TRANSITION_VERBS",
    "DuplicateVerbError",
    "EventType",
    "Vocabulary",
    "all_verbs",
    "describe",
    "is_registered",
    "phase_of",
    "register",
    "transition_verbs",
]

_VERB_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")

# The parts of a request's life its timeline groups events by, in order.
PHASE_NAMES = ("submission", "classification", "decision", "execution")


class DuplicateVerbError(ValueError):
    """A verb was registered twice."""


@dataclass(frozen=True)
class EventType:
    """A registered verb and its facts."""

    verb: str
    description: str
    # Which part of a request's life the event belongs to on the timeline (None: none of them).
    phase: str | None = None
    # It records a move of the state machine (from one state to another).
    transition: bool = False


class Vocabulary:
    """A set of registered verbs. The module-level functions use the default one."""

    def __init__(self) -> None:
        self._events: dict[str, EventType] = {}

    def register(self, verb: str, description: str, *, phase: str | None = None, transition: bool = False) -> EventType:
        """Register `verb` ("noun.past_tense") with its facts; raise DuplicateVerbError if it exists."""
        if not _VERB_PATTERN.match(verb):
            raise ValueError(f"audit verb {verb!r} must be lowercase dotted words, e.g. 'request.approved'")
        if not description.strip():
            raise ValueError(f"audit verb {verb!r} needs a description")
        if phase is not None and phase not in PHASE_NAMES:
            raise ValueError(f"audit verb {verb!r}: phase must be one of {PHASE_NAMES} or None, not {phase!r}")
        if verb in self._events:
            raise DuplicateVerbError(f"audit verb {verb!r} is already registered")
        event = EventType(verb=verb, description=description, phase=phase, transition=transition)
        self._events[verb] = event
        return event

    def is_registered(self, verb: str) -> bool:
        return verb in self._events

    def describe(self, verb: str) -> str:
        """Return the description of a registered verb; KeyError if unknown."""
        return self._events[verb].description

    def all_verbs(self) -> list[str]:
        """All registered verbs in registration order."""
        return list(self._events)

    def phases(self) -> dict[str, str]:
        """Verb -> its phase, for the verbs registered with one."""
        return {verb: event.phase for verb, event in self._events.items() if event.phase is not None}

    def transition_verbs(self) -> frozenset[str]:
        """The verbs registered as recording a move of the state machine."""
        return frozenset(verb for verb, event in self._events.items() if event.transition)


VOCABULARY = Vocabulary()


def register(verb: str, description: str, *, phase: str | None = None, transition: bool = False) -> EventType:
    """Register a verb in the project vocabulary; raises DuplicateVerbError on a duplicate."""
    return VOCABULARY.register(verb, description, phase=phase, transition=transition)


def is_registered(verb: str) -> bool:
    return VOCABULARY.is_registered(verb)


def describe(verb: str) -> str:
    return VOCABULARY.describe(verb)


def all_verbs() -> list[str]:
    return VOCABULARY.all_verbs()


def transition_verbs() -> frozenset[str]:
    return VOCABULARY.transition_verbs()


def phase_of(verb: str, default: str = "other") -> str:
    """The timeline phase of `verb`; `default` for a verb with none (or not registered)."""
    event = VOCABULARY._events.get(verb)
    return event.phase if event is not None and event.phase is not None else default


# --- The project's verbs ----------------------------------------------------------

register("request.submitted", "An agent submitted an action or plan for approval.", phase="submission")
register(
    "request.queued",
    "The request was classified as needing people and now waits for approval.",
    phase="classification",
    transition=True,
)
register(
    "request.auto_approved",
    "The request was classified low risk and approved by the system.",
    phase="classification",
    transition=True,
)
register(
    "request.refused",
    "The request was classified prohibited and refused by policy.",
    phase="classification",
    transition=True,
)
register(
    "request.approved", "The approval quorum was reached for the current revision.", phase="decision", transition=True
)
register("request.rejected", "An eligible reviewer rejected the request.", phase="decision", transition=True)
register("request.expired", "The decision or execution deadline passed.", phase="decision", transition=True)
register(
    "request.cancelled",
    "The request was cancelled before reaching a terminal state.",
    phase="decision",
    transition=True,
)
register(
    "request.execution_claimed",
    "A worker or the agent claimed the approved execution.",
    phase="execution",
    transition=True,
)
register(
    "request.revalidation_failed",
    "Re-validation right before execution refused to run it.",
    phase="execution",
    transition=True,
)
register("request.succeeded", "The execution completed successfully.", phase="execution", transition=True)
register("request.failed", "The execution failed.", phase="execution", transition=True)
register("request.revised", "The request was revised (approve with edits, or a new revision).", phase="decision")
register(
    "request.quorum_unreachable", "Too few eligible approvers remain to ever reach the quorum.", phase="classification"
)
register("request.escalated", "The request was escalated to further approvers.", phase="classification")
register("decision.recorded", "A reviewer recorded a decision on a request revision.", phase="decision")
register("policy.changed", "An admin changed risk rules or policy settings.")
register("agent.created", "An agent identity was created.")
register("agent.token_created", "An API token was issued to an agent.")
register("agent.token_revoked", "An agent API token was revoked.")
register("emergency_stop.changed", "An emergency stop was switched on or off.")
register("audit.exported", "Audit events were exported.")
register("audit.verified", "The audit chain was verified and found intact.")
register("audit.chain_broken", "Verification found the audit chain broken.")
register("audit.key_rotated", "The audit signing key changed; signed by the previous key, naming the next.")
register("audit.sealed", "Rows written before signing began were verified and sealed by one signed event.")
# Execution engine (server-side executors): retries under one claim and one idempotency key.
register("request.execution_deferred", "A retryable execution failure; the next attempt is scheduled.")
register("request.execution_reclaimed", "A worker took a fresh lease for the next attempt of a claimed execution.")
# Risk-rule tuning: deadline extensions and per-rule notification settings.
register(
    "request.deadline_extended",
    "A reviewer extended a pending request's decision deadline (once, within the rule's limit).",
)
register(
    "rule.notifications_changed", "An admin changed a rule's notification, reminder, escalation or extension settings."
)
# Decision integrity: edits that regroup a request, proposals, step-up, sign-in throttling,
# four eyes on policy, and who changed which group's members.
register("request.reclassified", "An edit re-classified a pending request under a stricter rule, group or quorum.")
register("request.edit_proposed", "A reviewer proposed edited params that others must approve.")
register(
    "request.field_revealed",
    "A reviewer who may decide the request revealed one masked param (the field, never its value).",
)
register(
    "rules.masked_probe",
    "A risk-admin who may reveal them tested a rule reading masked params of a pending request (the fields, never their values).",
)
register("auth.step_up_failed", "A reviewer gave a wrong step-up proof for a decision.")
register("auth.session_ended", "A person's session was ended (repeated failed step-ups, passwords or codes).")
register("auth.throttled", "Repeated failed sign-ins: that account must wait before trying again from that address.")
register("group.membership_changed", "People were added to or removed from a group.")
register("policy.proposed", "A risk-admin proposed a policy change that waits for a second risk-admin.")
register("policy.proposal_approved", "A second risk-admin approved a proposed policy change, which applied.")
register("policy.proposal_rejected", "A proposed policy change was rejected or withdrawn.")
# Reviewer identity: signing in and out, and second factors.
register("auth.signed_in", "A person signed in (every factor the login asked for given).")
register("auth.signed_out", "A person signed out.")
register("auth.sign_in_failed", "A password or second-factor code given to sign in was refused.")
register(
    "auth.password_check_failed",
    "A signed-in person's password or code was refused (password change, re-authentication), by page.",
)
register("auth.mfa_enrolled", "A person added a second factor (authenticator app, recovery codes, passkey).")
register("auth.mfa_removed", "A person removed a second factor.")
register("auth.recovery_code_used", "A person used one of their single-use recovery codes.")
register(
    "auth.provider_signed_out",
    "An identity provider ended a person's sessions (back-channel logout, or it no longer vouches for them).",
)
# LangChain HITL and the like: a reviewer answers in place of the tool (it never runs).
register(
    "request.responded",
    "A reviewer replied in place of the tool call; the request ended rejected, unrun.",
    phase="decision",
    transition=True,
)

# Suspensions: a reviewer's typed answer to a paused workflow step (its keyed digest, never the answer).
register(
    "suspension.answered",
    "A reviewer answered a suspension: proposed, replaced or agreed with an answer.",
    phase="decision",
)
# Who may decide is policy (approvals.policy.authority).
register(
    "request.escalation_refused",
    "An escalation was refused: its group is neither the rule's own nor an approved escalation target.",
)
register(
    "membership.claims_applied",
    "An identity provider's group claims changed a person's groups at sign-in (never risk-admins).",
)
# The execution handshake: long tools renew their lease; a report after the lease ran out is kept, not applied.
register("request.execution_renewed", "The executor renewed its execution lease (a long-running tool).")
register(
    "request.completed_late",
    "An executor reported after its lease ran out: recorded with its digests; the outcome stays unknown.",
)
# Decisions from chat: a Slack identity linked to (or unlinked from) a person.
register("auth.chat_linked", "A signed-in person confirmed a Slack identity (enterprise, workspace, user) as theirs.")
register("auth.chat_unlinked", "A person removed their Slack links; those identities decide nothing from then on.")

# Transparency-log checkpoints (audit/notes.py): the C2SP signed note of the tree's size and root.
register("audit.checkpoint", "A signed-note checkpoint of the audit tree (size and root) was issued.")
# Witnesses (audit/witnesses.py): a configured witness's valid cosignature/v1 of a checkpoint, stored.
register("audit.cosigned", "A configured witness cosigned a checkpoint (it checked consistency with its last one).")

# --- Derived from the registrations above ----------------------------------------------

# The verbs that record a move of the state machine (each `approvals.states.TRANSITIONS`
# value and variant; a test holds them equal).
TRANSITION_VERBS: frozenset[str] = VOCABULARY.transition_verbs()
# Verb -> the part of a request's life it belongs to, for the timeline (`phase_of` reads it
# with a default for the rest).
PHASES: dict[str, str] = VOCABULARY.phases()
