"""The registered event vocabulary is pinned; unknown verbs never reach the log."""

from __future__ import annotations

import pytest

from audit import vocabulary
from audit.chain import record
from audit.models import AuditEvent
from audit.vocabulary import (
    PHASES,
    TRANSITION_VERBS,
    DuplicateVerbError,
    Vocabulary,
    all_verbs,
    is_registered,
    phase_of,
    transition_verbs,
)

GOLDEN_VERBS = [
    "request.submitted",
    "request.queued",
    "request.auto_approved",
    "request.refused",
    "request.approved",
    "request.rejected",
    "request.expired",
    "request.cancelled",
    "request.execution_claimed",
    "request.revalidation_failed",
    "request.succeeded",
    "request.failed",
    "request.revised",
    "request.quorum_unreachable",
    "request.escalated",
    "decision.recorded",
    "policy.changed",
    "agent.created",
    "agent.token_created",
    "agent.token_revoked",
    "emergency_stop.changed",
    "audit.exported",
    "audit.verified",
    "audit.chain_broken",
    "audit.key_rotated",
    "audit.sealed",
    "request.execution_deferred",
    "request.execution_reclaimed",
    "request.deadline_extended",
    "rule.notifications_changed",
    "request.reclassified",
    "request.edit_proposed",
    "request.field_revealed",
    "rules.masked_probe",
    "auth.step_up_failed",
    "auth.session_ended",
    "auth.throttled",
    "group.membership_changed",
    "policy.proposed",
    "policy.proposal_approved",
    "policy.proposal_rejected",
    "auth.signed_in",
    "auth.signed_out",
    "auth.sign_in_failed",
    "auth.password_check_failed",
    "auth.mfa_enrolled",
    "auth.mfa_removed",
    "auth.recovery_code_used",
    "auth.provider_signed_out",
    "request.responded",
    "suspension.answered",
    "request.escalation_refused",
    "membership.claims_applied",
    "request.execution_renewed",
    "request.completed_late",
    "auth.chat_linked",
    "auth.chat_unlinked",
    "audit.checkpoint",
    "audit.cosigned",
]

GOLDEN_TRANSITION_VERBS = {
    "request.queued",
    "request.auto_approved",
    "request.refused",
    "request.approved",
    "request.rejected",
    "request.expired",
    "request.cancelled",
    "request.execution_claimed",
    "request.revalidation_failed",
    "request.succeeded",
    "request.failed",
    "request.responded",
}


# The timeline's phase of each verb that has one (every other verb reads as "other").
GOLDEN_PHASES = {
    "request.submitted": "submission",
    "request.queued": "classification",
    "request.auto_approved": "classification",
    "request.refused": "classification",
    "request.quorum_unreachable": "classification",
    "request.escalated": "classification",
    "decision.recorded": "decision",
    "suspension.answered": "decision",
    "request.revised": "decision",
    "request.approved": "decision",
    "request.rejected": "decision",
    "request.responded": "decision",
    "request.expired": "decision",
    "request.cancelled": "decision",
    "request.execution_claimed": "execution",
    "request.revalidation_failed": "execution",
    "request.succeeded": "execution",
    "request.failed": "execution",
}


def test_the_vocabulary_is_exactly_the_golden_list():
    # Verbs are stored forever: adding one is a deliberate change to this list,
    # and renaming or removing one is never allowed.
    assert all_verbs() == GOLDEN_VERBS


def test_transition_verbs_are_the_request_state_changes():
    assert TRANSITION_VERBS == GOLDEN_TRANSITION_VERBS
    assert TRANSITION_VERBS <= set(all_verbs())


def test_each_verb_says_its_phase_on_its_registration():
    assert PHASES == GOLDEN_PHASES
    assert {verb: phase_of(verb) for verb in all_verbs()} == {
        verb: GOLDEN_PHASES.get(verb, "other") for verb in all_verbs()
    }
    assert phase_of("request.execution_deferred", "") == ""
    assert phase_of("request.teleported") == "other"


def test_every_verb_transition_can_emit_is_registered_as_a_transition():
    # transition() records a move under its TRANSITIONS verb or one of its variants, and
    # nothing else records a move: the two lists are one fact, held equal here.
    from approvals.states import TRANSITION_VARIANTS, TRANSITIONS

    emitted = set(TRANSITIONS.values()).union(*TRANSITION_VARIANTS.values())
    assert emitted <= set(all_verbs())
    assert transition_verbs() == TRANSITION_VERBS == emitted


def test_a_phase_outside_the_timeline_is_refused():
    with pytest.raises(ValueError, match="phase"):
        Vocabulary().register("report.generated", "A report was generated.", phase="afterlife")


def test_every_verb_has_a_description():
    assert all(vocabulary.describe(verb).strip() for verb in all_verbs())


def test_registering_a_duplicate_verb_is_refused():
    with pytest.raises(DuplicateVerbError):
        vocabulary.register("request.approved", "Someone approved it again")
    assert all_verbs() == GOLDEN_VERBS


def test_a_fresh_vocabulary_refuses_duplicates_and_malformed_names():
    words = Vocabulary()
    words.register("report.generated", "A report was generated.")
    with pytest.raises(DuplicateVerbError):
        words.register("report.generated", "Again.")
    with pytest.raises(ValueError):
        words.register("Report Generated", "Not a dotted name.")
    assert words.all_verbs() == ["report.generated"]


@pytest.mark.django_db
def test_record_refuses_an_unregistered_verb(system):
    assert not is_registered("request.teleported")
    with pytest.raises(ValueError, match="not a registered audit verb"):
        record("request.teleported", actor=system)
    assert not AuditEvent.objects.exists()


def test_model_clean_refuses_an_unregistered_verb():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        AuditEvent(verb="request.teleported").clean()
