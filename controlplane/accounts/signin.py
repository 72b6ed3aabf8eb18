"""Sign-in throttling that slows guessing down but never locks anyone out.

allauth runs the login (the dashboard's, which the Django admin uses too); its adapter
(`controlplane.accounts.adapter`) wraps every password check in a `SignInThrottle`.

Failures are counted per account (what was typed as the username, normalized) and
per (account, client address), in the Django cache with atomic increments (Redis
when REDIS_URL is set, so every web process shares the counts). The first
`LOGIN_FREE_FAILURES` failures of an account within `LOGIN_FAILURE_WINDOW_SECONDS`
cost nothing. After that, each further failure makes the (account, address) pair
it came from wait: `LOGIN_DELAY_BASE_SECONDS`, doubling with every failure of the
account, up to `LOGIN_DELAY_MAX_SECONDS`. While a pair waits, its attempts are
refused before the password is checked, so waiting cannot be skipped by guessing.

It is never a hard lock: the wait belongs to the address the failures came from,
so the right password from an address that is not waiting signs in even while a
stranger is being slowed down on the same account. A success clears that pair
(its wait and its count), not the account's count: an attacker who also knows one
good password cannot launder their failures with it.

Each failure that starts a wait is audited (`auth.throttled`); refused attempts
during a wait are not, so a flood of them cannot flood the chain.

The client address is read in one place, `controlplane.http.client_address` (through
`TRUSTED_PROXIES` only).
"""

from __future__ import annotations

import logging
import math
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.http import HttpRequest
from django.utils.crypto import salted_hmac
from django.utils.translation import ngettext

from audit.chain import Actor, digest, record
from controlplane.http.client_address import client_address

logger = logging.getLogger(__name__)

__all__ = [
    "SignInThrottle",
    "SignInWaiting",
    "client_address",
    "wait_message",
]

# Wait deadlines are stored as timestamps and compared with the clock; the cache's own
# expiry only lets it forget them, so it outlives the deadline by this much.
_FORGET_AFTER_SLACK_SECONDS = 60
# While an account is past its free failures, one password check at a time per
# (account, address): a burst of parallel guesses must not all slip in before the
# first failure starts the wait. The slot frees itself after this long if a worker dies.
_ATTEMPT_SLOT_SECONDS = 30
# 2**32 seconds is far past any sensible maximum; the cap keeps the arithmetic small.
_MAX_DOUBLINGS = 32

SYSTEM_ACTOR_LABEL = "sign-in"


# --- Throttling ----------------------------------------------------------------------------------


class SignInWaiting(Exception):
    """This (account, address) pair must wait `seconds` more before trying again."""

    def __init__(self, seconds: int) -> None:
        super().__init__(seconds)
        self.seconds = seconds


def wait_message(seconds: int) -> str:
    """What a person refused for waiting is told."""
    return ngettext(
        "Too many failed sign-ins for this account from here; try again in %(n)d second.",
        "Too many failed sign-ins for this account from here; try again in %(n)d seconds.",
        seconds,
    ) % {"n": seconds}


def normalize_account(username: str) -> str:
    """The account a typed username counts against: NFKC, surrounding space dropped, case-folded.

    Coarser than the user table's own matching on purpose: `ALICE`, ` alice` and a
    full-width `ａｌｉｃｅ` are one account for counting, so variants do not buy free tries.
    """
    return unicodedata.normalize("NFKC", username).strip().casefold()


def delay_for(account_failures: int) -> int:
    """Seconds a pair waits after the account's `account_failures`-th failure (0: free)."""
    beyond = account_failures - settings.LOGIN_FREE_FAILURES
    if beyond <= 0:
        return 0
    delay = settings.LOGIN_DELAY_BASE_SECONDS * 2 ** min(beyond - 1, _MAX_DOUBLINGS)
    return int(min(delay, settings.LOGIN_DELAY_MAX_SECONDS))


def _keyed(purpose: str, value: str) -> str:
    # Keyed, so cache keys never reveal what was typed (people paste passwords into
    # the username field) and cannot be computed by someone reading the cache.
    return salted_hmac(f"controlplane.accounts.signin.{purpose}", value, algorithm="sha256").hexdigest()[:40]


@dataclass(frozen=True)
class SignInThrottle:
    """The failure counts and the wait of one (account, address) pair.

    Build it with `for_attempt()`; wrap the password check in `attempt()`; then call
    `failed()` or `succeeded()`.
    """

    # The normalized username; kept out of repr, since it may be a pasted password.
    account: str = field(repr=False)
    address: str
    # Where the secret was typed: "dashboard" (the sign-in form), or a page of
    # `password_checks` ("reauthenticate", "password_change", "mfa_sign_in", "mfa_reauthenticate", "step_up").
    via: str

    @classmethod
    def for_attempt(cls, request: HttpRequest | None, username: str, *, via: str) -> SignInThrottle:
        return cls(account=normalize_account(username), address=client_address(request), via=via)

    # -- cache keys --

    @property
    def _account_id(self) -> str:
        return _keyed("account", self.account)

    @property
    def _pair_id(self) -> str:
        return _keyed("pair", f"{self.account}\x00{self.address}")

    def _account_bucket_key(self, bucket: int) -> str:
        return f"sign-in:account:{self._account_id}:{bucket}"

    @property
    def _pair_failures_key(self) -> str:
        return f"sign-in:pair-failures:{self._pair_id}"

    @property
    def _wait_key(self) -> str:
        return f"sign-in:wait:{self._pair_id}"

    @property
    def _slot_key(self) -> str:
        return f"sign-in:slot:{self._pair_id}"

    # -- reading --

    def account_failures(self, now: float | None = None) -> int:
        """The account's failures in the current and the previous window.

        Fixed windows, two of them: every span of one window is inside those two, so
        "more than N failures within the window" is never missed (it may count up to
        one window more, which only errs towards slowing down).
        """
        bucket = self._bucket(time.time() if now is None else now)
        counts = cache.get_many([self._account_bucket_key(bucket), self._account_bucket_key(bucket - 1)])
        return sum(int(value) for value in counts.values())

    def seconds_to_wait(self, now: float | None = None) -> int:
        """Whole seconds this pair must still wait; 0 when it may try."""
        now = time.time() if now is None else now
        until = cache.get(self._wait_key)
        if until is None or float(until) <= now:
            return 0
        return max(1, math.ceil(float(until) - now))

    # -- the attempt --

    def check(self, check: Callable[[], bool | None], *, on_wrong: Callable[[int], None]) -> bool | None:
        """Run one secret check for this pair: the step every page that checks a secret takes.

        `check` says whether the secret is right: True, and the pair's failures and wait are
        forgotten; False, and it is counted, `on_wrong(delay)` records it, and a wait it starts
        is raised; None, it refused on its own without checking, and nothing is counted or
        forgotten. Returns what `check` said. Raises a ValidationError (code `throttled`)
        without checking while the pair must wait, or when this wrong one starts a wait.
        """
        try:
            with self.attempt():
                right = check()
                if right is False:
                    delay = self.failed()
                    on_wrong(delay)
                    if delay:
                        raise SignInWaiting(delay)
        except SignInWaiting as waiting:
            raise forms.ValidationError(wait_message(waiting.seconds), code="throttled") from None
        if right:
            self.succeeded()
        return right

    @contextmanager
    def attempt(self) -> Iterator[None]:
        """Admit one password check for this pair, or raise SignInWaiting before it.

        Past the account's free failures, only one check per pair runs at a time;
        a concurrent one is refused as waiting (it was not checked, so not counted).
        If the cache is unreachable the check runs unthrottled (see `_cache_down`).
        """
        try:
            holds_slot = self._admit()
        except SignInWaiting:
            raise
        except Exception:  # noqa: BLE001  (the cache backend's own connection errors)
            _cache_down("admitting a sign-in")
            holds_slot = False
        try:
            yield
        finally:
            if holds_slot:
                self._release_slot()

    def failed(self) -> int:
        """Count one failed password check; the seconds the pair must now wait (0: none).

        A failure that starts a wait is audited, in its own transaction.
        """
        try:
            account_failures, address_failures, delay = self._count_failure()
        except Exception:  # noqa: BLE001
            _cache_down("counting a failed sign-in")
            return 0
        if delay:
            self._audit_wait(account_failures=account_failures, address_failures=address_failures, delay=delay)
        return delay

    def succeeded(self) -> None:
        """Forget this pair's failures and wait; the account's count stays."""
        try:
            cache.delete_many([self._pair_failures_key, self._wait_key])
        except Exception:  # noqa: BLE001
            _cache_down("clearing a signed-in pair")

    # -- helpers --

    def _admit(self) -> bool:
        """Raise SignInWaiting while the pair waits; True when this check took the pair's slot."""
        waiting = self.seconds_to_wait()
        if waiting:
            raise SignInWaiting(waiting)
        if self.account_failures() < settings.LOGIN_FREE_FAILURES:
            return False
        if not cache.add(self._slot_key, 1, timeout=_ATTEMPT_SLOT_SECONDS):
            raise SignInWaiting(max(1, self.seconds_to_wait()))
        return True

    def _release_slot(self) -> None:
        try:
            cache.delete(self._slot_key)
        except Exception:  # noqa: BLE001  (it expires on its own)
            _cache_down("releasing a sign-in slot")

    def _count_failure(self) -> tuple[int, int, int]:
        """Count the failure for the account and the pair, start the pair's wait if due.

        Returns (account failures, address failures, delay seconds).
        """
        now = time.time()
        window = settings.LOGIN_FAILURE_WINDOW_SECONDS
        _increment(self._account_bucket_key(self._bucket(now)), timeout=2 * window + _FORGET_AFTER_SLACK_SECONDS)
        address_failures = _increment(self._pair_failures_key, timeout=window)
        account_failures = self.account_failures(now)
        delay = delay_for(account_failures)
        if delay:
            cache.set(self._wait_key, now + delay, timeout=delay + _FORGET_AFTER_SLACK_SECONDS)
        return account_failures, address_failures, delay

    @staticmethod
    def _bucket(now: float) -> int:
        return int(now // settings.LOGIN_FAILURE_WINDOW_SECONDS)

    def _audit_wait(self, *, account_failures: int, address_failures: int, delay: int) -> None:
        record(
            "auth.throttled",
            actor=Actor.system(SYSTEM_ACTOR_LABEL),
            metadata={
                **self._account_metadata(),
                "address": digest(self.address),
                "account_failures": account_failures,
                "address_failures": address_failures,
                "delay_seconds": delay,
                "via": self.via,
            },
        )

    def _account_metadata(self) -> dict[str, Any]:
        """Name the account when exactly one user has it; otherwise only a keyed digest.

        What was typed may be a pasted password: its raw text never reaches the chain.
        The digest is of the normalized name, so one unknown name's events correlate.
        """
        User = get_user_model()
        matches = list(
            User._default_manager.filter(**{f"{User.USERNAME_FIELD}__iexact": self.account}).values_list(
                "pk", User.USERNAME_FIELD
            )[:2]
        )
        if len(matches) == 1 and normalize_account(matches[0][1]) == self.account:
            user_id, username = matches[0]
            return {"username": username, "user_id": user_id}
        return {"username_digest": digest(self.account)["hmac"]}


def _increment(key: str, *, timeout: int) -> int:
    """Add one to the counter `key` (created with `timeout` if missing); the new count.

    add() then incr(): both atomic on Redis and in the local-memory cache, so
    concurrent failures are all counted.
    """
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key)
    except ValueError:  # evicted between add and incr
        cache.add(key, 1, timeout=timeout)
        return 1


def _cache_down(doing: str) -> None:
    """Log that throttling is off for this attempt because the cache is unreachable.

    Throttling is a brake: a cache outage must not stop every reviewer signing in
    (someone may need to sign in to press the emergency stop), so it fails open, loudly.
    """
    logger.error("sign-in throttling unavailable while %s; going on unthrottled", doing, exc_info=True)
