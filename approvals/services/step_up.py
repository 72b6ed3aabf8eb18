"""Step-up: a proof of presence made for one decision, checked under the row lock.

Deciding a request whose level needs it (`settings.STEP_UP_RISK_LEVELS`, default
critical, or a rule with `step_up`) takes a proof given with that decision: the code
of the reviewer's authenticator app once they have one (allauth.mfa's TOTP; each code
is accepted once), and their passkey once they have one: an assertion over a challenge
derived from the decision, valid once (`passkeys`); else their password (`method_for`).
For someone who signs in only through an identity provider (no usable password, no
passkey, no app): a fresh sign-in there, after the challenge and within a short window
(`provider_step_up`). The decision services call `require_step_up` after any
re-classification, so an edit that raises the level raises the bar too.

A proof is valid for the decision it came with: a single decision's proof binds
to the first (request, revision, verdict, payload) it is used for, the payload being
the digest of the edits or the answer it approves (`payload_digest`); a batch proof
names every decision it covers and carries one digest over them (DESIGN.md "A
decision names what it decides").
A wrong proof is audited (`auth.step_up_failed`) and counted per person;
`settings.STEP_UP_FAILURE_LIMIT` wrong proofs in a row end the session they came
through (`auth.session_ended`), so the prompt is no password oracle: guessing on
needs a fresh sign-in, which is throttled. The same wrong count is shared with the
site's password and code pages (`count_wrong_proof`), and a password or code is
checked behind the sign-in throttle itself (`install_secret_gate`): a wrong one counts
for the account's growing waits per (account, address); during a wait the answer is
429 `step_up_throttled`, before the secret is checked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from importlib import import_module
from typing import Any, Protocol

from django.conf import settings
from django.core.cache import cache

from audit.chain import record

from .. import errors
from ..errors import DomainError
from ..people import Person
from ..policy.step_up_levels import needs_step_up
from . import passkeys, provider_step_up
from .core import PersistedRefusal

__all__ = [
    "PASSKEY",
    "PASSWORD",
    "PROVIDER",
    "TOTP",
    "StepUpProof",
    "SecretGate",
    "count_wrong_proof",
    "decision_digest",
    "end_session",
    "forget_wrong_proofs",
    "install_secret_gate",
    "method_for",
    "needs_step_up",
    "payload_digest",
    "require_step_up",
]

PASSWORD = "password"
TOTP = "totp"
PASSKEY = "passkey"
PROVIDER = "provider"
METHODS = (PASSWORD, TOTP, PASSKEY, PROVIDER)
_ASKS = {
    PASSWORD: "your password again",
    TOTP: "a code from your authenticator app",
    PASSKEY: "your passkey, for this decision",
    PROVIDER: "signing in again at your identity provider, for this decision",
}
_NAMES = {
    PASSWORD: "password",
    TOTP: "code",
    PASSKEY: "passkey confirmation",
    PROVIDER: "sign-in at your identity provider",
}

# (request id, revision, verdict, payload digest): the payload is what the verdict
# carries (an edit's params, a suspension's answer; `payload_digest`), "" for none.
# A triple (request id, revision, verdict) is read as one with no payload.
Decision = tuple[str, int, str, str]

_FAILURE_WINDOW_SECONDS = 3600
# The proofs a guesser could find by trying (a passkey signs a fresh challenge; a provider
# sign-in is throttled there).
_GUESSABLE = (PASSWORD, TOTP)


class SecretGate(Protocol):
    """The sign-in throttle, as the step-up sees it (installed by the site: `install_secret_gate`)."""

    def wait_seconds(self, user: Any) -> int:
        """Seconds this person must wait, from where the call came, before a secret is checked (0: none)."""

    def checked(self, user: Any, *, method: str, right: bool) -> None:
        """Count one checked secret: a wrong one towards the waits, a right one clears this address's."""


_secret_gate: SecretGate | None = None


def install_secret_gate(gate: SecretGate | None) -> None:
    """Put the site's sign-in throttle in front of every password and code step-up checks.

    The services cannot import the site's accounts (`controlplane.accounts.password_checks`
    installs it at start), so a wrong step-up password counts with wrong sign-ins for the
    account, per (account, client address), with the same growing waits.
    """
    global _secret_gate
    _secret_gate = gate


def payload_digest(value: Any) -> str:
    """sha256 over the canonical JSON of what a decision carries (the edits, the answer);
    "" for nothing. Canonical as JSON, not as Python: `true`, `1` and `1.0` differ."""
    if value is None:
        return ""
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    # surrogatepass: text the edges let through is digested, never a 500 (they refuse lone surrogates first).
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()


def _decision(item: Iterable[Any]) -> Decision:
    request_id, revision, verdict, *payload = item
    if len(payload) > 1:
        raise ValueError("a decision is (request, revision, verdict[, payload digest])")
    return (str(request_id), int(revision), str(verdict), str(payload[0]) if payload else "")


def decision_digest(decisions: Iterable[Iterable[Any]]) -> str:
    """sha256 over the sorted lines a proof covers: `request:revision:verdict`, with
    `:payload-digest` appended when the decision carries edits or an answer."""
    lines = sorted(
        f"{request_id}:{revision}:{verdict}" + (f":{payload}" if payload else "")
        for request_id, revision, verdict, payload in map(_decision, decisions)
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


class StepUpProof:
    """What a reviewer gave to prove presence for a decision. The secret never
    leaves this object: not in its repr, not in audit rows, not in logs."""

    __slots__ = ("method", "_secret", "_covers", "_verified_for_user", "_refused", "_nonce", "_rp_id", "credential_id")

    def __init__(
        self, method: str, secret: Any, *, covers: Iterable[Decision] | None = None, nonce: str = "", rp_id: str = ""
    ) -> None:
        if method not in METHODS:
            raise ValueError(f"unknown step-up method {method!r}")
        self.method = method
        self._secret = secret
        self._covers: frozenset[Decision] | None = None if covers is None else frozenset(map(_decision, covers))
        self._verified_for_user: Any = None
        self._refused = False  # a wrong proof is counted once, however many decisions it came with
        self._nonce = nonce  # passkey: the challenge's nonce, and the host the browser signed for
        self._rp_id = rp_id
        self.credential_id = ""  # passkey: which one signed; provider: which provider; once verified

    @classmethod
    def password(cls, password: str, *, covers: Iterable[Decision] | None = None) -> StepUpProof:
        return cls(PASSWORD, password, covers=covers)

    @classmethod
    def totp(cls, code: str, *, covers: Iterable[Decision] | None = None) -> StepUpProof:
        return cls(TOTP, code, covers=covers)

    @classmethod
    def passkey(
        cls, assertion: Any, *, nonce: str, rp_id: str, covers: Iterable[Decision] | None = None
    ) -> StepUpProof:
        """A WebAuthn assertion over the challenge `passkeys.issue_challenge` gave for these decisions."""
        return cls(PASSKEY, assertion, covers=covers, nonce=nonce, rp_id=rp_id)

    @classmethod
    def provider(cls, nonce: str, *, covers: Iterable[Decision] | None = None) -> StepUpProof:
        """The nonce of a challenge `provider_step_up` saw proven by a fresh sign-in at the provider."""
        return cls(PROVIDER, nonce, covers=covers, nonce=nonce)

    @property
    def digest(self) -> str:
        """The digest of the decisions this proof covers ('' until it is bound)."""
        return decision_digest(self._covers) if self._covers else ""

    def _bind(self, decision: Decision) -> bool:
        """Whether this proof may be used for `decision`; a single decision's proof
        binds to the first decision it is used for."""
        if self._covers is None:
            self._covers = frozenset({decision})
        return decision in self._covers

    def _matches(self, user: Any) -> bool:
        if self._verified_for_user is not None:
            return bool(self._verified_for_user == user.pk)
        if not self._secret:
            return False
        gate = _secret_gate if self.method in _GUESSABLE else None
        waiting = gate.wait_seconds(user) if gate is not None else 0
        if waiting:  # refused before the secret is checked, so waiting cannot be skipped by guessing
            raise DomainError(
                errors.STEP_UP_THROTTLED,
                f"Too many wrong passwords or codes for this account from here; try again in {waiting} seconds.",
                retry_after=waiting,
            )
        right = _VERIFY[self.method](user, self)
        if gate is not None:
            gate.checked(user, method=self.method, right=right)
        if right:
            # One check per proof: a batch proof is verified once, then binds by digest.
            self._verified_for_user = user.pk
            return True
        return False

    def __repr__(self) -> str:
        return f"StepUpProof({self.method!r}, covers={len(self._covers or ())})"


def _totp_authenticator(user: Any) -> Any:
    from allauth.mfa.models import Authenticator

    return Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).first()


def _code_is_right(user: Any, code: str) -> bool:
    """Whether `code` is the current one of `user`'s authenticator app; a code is accepted
    once (allauth remembers used codes), so one seen over a shoulder cannot decide again."""
    authenticator = _totp_authenticator(user)
    return authenticator is not None and authenticator.wrap().validate_code(code)


def _passkey_signed(user: Any, proof: StepUpProof) -> bool:
    proof.credential_id = passkeys.verify_assertion(
        user, nonce=proof._nonce, assertion=proof._secret, digest=proof.digest, rp_id=proof._rp_id
    )
    return bool(proof.credential_id)


def _provider_proved(user: Any, proof: StepUpProof) -> bool:
    proof.credential_id = provider_step_up.spend(user, proof._secret, proof.digest)
    return bool(proof.credential_id)


_VERIFY = {
    PASSWORD: lambda user, proof: user.check_password(proof._secret),
    TOTP: lambda user, proof: _code_is_right(user, proof._secret),
    PASSKEY: _passkey_signed,
    PROVIDER: _provider_proved,
}


def signs_in_only_through_a_provider(user: Any) -> bool:
    """Has an account at a provider, and no password that signs in here (none set, or
    passwords turned off: LOCAL_PASSWORD_LOGIN=0)."""
    from allauth.socialaccount.models import SocialAccount

    if user.has_usable_password() and settings.LOCAL_PASSWORD_LOGIN:
        return False
    return bool(SocialAccount.objects.filter(user_id=user.pk).exists())


def method_for(user: Any) -> str:
    """The proof `user` gives: their passkey once they have one, else their authenticator
    app's code once they have one, else a fresh sign-in at their identity provider when
    that is the only way they sign in, else their password (the weaker ones are then refused)."""
    if passkeys.has_passkey(user):
        return PASSKEY
    if _totp_authenticator(user) is not None:
        return TOTP
    return PROVIDER if signs_in_only_through_a_provider(user) else PASSWORD


def require_step_up(request: Any, reviewer: Person, *, decision: Decision, risk_level: str, rule_asks: bool) -> str:
    """Check the proof for one decision on a locked request; returns the method used
    ('' when the level needs none).

    Raises DomainError `step_up_required` (403; nothing written) when no proof, or a
    proof made for another decision, was given; PersistedRefusal `step_up_failed`
    (403) when it is wrong, or `session_ended` (401) when that was one wrong proof
    too many. Both are audited and committed.
    """
    if not needs_step_up(risk_level, rule_asks=rule_asks):
        return ""
    proof: StepUpProof | None = reviewer.step_up
    expected = method_for(reviewer.user)
    if proof is None or proof.method != expected:
        raise DomainError(
            errors.STEP_UP_REQUIRED,
            f"Deciding a {risk_level} request needs {_ASKS[expected]}.",
            risk_level=risk_level,
            method=expected,
        )
    if not proof._bind(_decision(decision)):
        raise DomainError(
            errors.STEP_UP_REQUIRED,
            "That step-up proof was made for another decision; give one for this decision.",
            risk_level=risk_level,
        )
    if not proof._refused and proof._matches(reviewer.user):
        cache.delete(_failures_key(reviewer.user))
        return proof.method
    if proof._refused:
        raise DomainError(errors.STEP_UP_FAILED, f"That {_NAMES[proof.method]} is not right.")
    proof._refused = True
    _refuse_wrong_proof(request, reviewer, proof)
    raise AssertionError("unreachable")  # _refuse_wrong_proof always raises


def _failures_key(user: Any) -> str:
    return f"step-up-failures:{user.pk}"


def count_wrong_proof(user: Any) -> int:
    """Count one wrong proof of presence by signed-in `user`; how many in a row now.

    One count per person for every check a signed-in person makes: step-up here, and the
    password and code pages (`controlplane.accounts.password_checks`), so guesses spread
    over several pages still end the session at `STEP_UP_FAILURE_LIMIT`.
    """
    return _count_failure(user)


def forget_wrong_proofs(user: Any) -> None:
    """A right proof: the wrong ones in a row start again from zero."""
    cache.delete(_failures_key(user))


def _count_failure(user: Any) -> int:
    key = _failures_key(user)
    cache.add(key, 0, timeout=_FAILURE_WINDOW_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:  # the counter expired between add and incr
        cache.set(key, 1, timeout=_FAILURE_WINDOW_SECONDS)
        return 1


def _refuse_wrong_proof(request: Any, reviewer: Person, proof: StepUpProof) -> None:
    failures = _count_failure(reviewer.user)
    limit = settings.STEP_UP_FAILURE_LIMIT
    record(
        "auth.step_up_failed",
        actor=reviewer,
        request=request,
        metadata={"method": proof.method, "failures": failures, "limit": limit},
    )
    if failures < limit:
        left = limit - failures
        raise PersistedRefusal(
            errors.STEP_UP_FAILED,
            f"That {_NAMES[proof.method]} is not right. {left} more wrong {'try' if left == 1 else 'tries'} "
            "and you will be signed out.",
            tries_left=left,
        )
    cache.delete(_failures_key(reviewer.user))
    ended = _end_session(reviewer.session_key)
    record(
        "auth.session_ended",
        actor=reviewer,
        request=request,
        metadata={"reason": "step_up_failures", "failures": failures, "session_ended": ended},
    )
    raise PersistedRefusal(
        errors.SESSION_ENDED,
        "Too many wrong step-up proofs: you have been signed out. Sign in again to continue.",
    )


def end_session(session_key: str) -> bool:
    """Delete the session `session_key` from the store; whether there was one to delete."""
    return _end_session(session_key)


def _end_session(session_key: str) -> bool:
    if not session_key:
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    store.delete()
    return True
