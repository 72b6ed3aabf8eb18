"""Single sign-on through a real OpenID Connect provider on loopback (the `oidc-provider`
package, tests/identity/idp/), driven through the browser: a person the provider puts in
`reviewers` lands in that group; when the provider drops the group, their next sign-in
takes it away (audited, with the provider as the actor) and closes their open socket.
Signing out at the provider ends the session here at once (back-channel logout), and a
person the provider no longer knows is signed out by the user-info re-check."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from approvals import policy, services
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import Kind, State
from audit.models import AuditEvent
from controlplane.accounts.recheck import recheck_provider_sessions
from controlplane.identity_settings import social_providers
from tests.browser.conftest import confirm_decision, select_card
from tests.live import DaphneServer, child_environment, free_port, stop_process

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

IDP = Path(__file__).resolve().parent.parent / "identity" / "idp"
PROVIDER_ID = "test-idp"


class LoopbackIdP:
    """tests/identity/idp/server.mjs on a free port; `grant(account, groups)` rewrites its claims."""

    def __init__(self, tmp: Path, callback: str, backchannel: str = "") -> None:
        if not (IDP / "node_modules").exists():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=IDP, check=True, capture_output=True)
        self.port = free_port()
        self.issuer = f"http://localhost:{self.port}"
        self.accounts = tmp / "accounts.json"
        self.grant("sso-alice", [])
        self.log_path = tmp / "idp.log"
        self.process = subprocess.Popen(
            ["node", "server.mjs"],
            cwd=IDP,
            stdout=self.log_path.open("wb"),
            stderr=subprocess.STDOUT,
            env={
                "PATH": "/usr/bin:/bin",
                "PORT": str(self.port),
                "CLIENT_ID": "controlplane",
                "CLIENT_SECRET": "loopback-secret",
                "REDIRECT_URI": callback,
                "BACKCHANNEL_URI": backchannel,
                "ACCOUNTS_FILE": str(self.accounts),
            },
        )
        deadline = time.monotonic() + 20  # bounds a hang only
        while True:
            try:
                with urllib.request.urlopen(f"{self.issuer}/.well-known/openid-configuration", timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the loopback identity provider did not start") from None
                time.sleep(0.1)

    def grant(self, account: str, groups: list[str], *, disabled: bool = False) -> None:
        self.accounts.write_text(json.dumps({account: {"groups": groups, "disabled": disabled}}))


@pytest.fixture(scope="module")
def sso_site(django_db_setup, django_db_blocker, tmp_path_factory):
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    port = free_port()
    callback = (
        f"http://localhost:{port}/accounts/oidc/{PROVIDER_ID}/login/callback/,"
        f"http://localhost:{port}/accounts/step-up/provider/callback/"
    )
    # 127.0.0.1, not localhost: daphne listens on IPv4 only, and node may try ::1 first.
    backchannel = f"http://127.0.0.1:{port}/accounts/oidc/{PROVIDER_ID}/backchannel-logout/"
    idp = LoopbackIdP(tmp_path_factory.mktemp("idp"), callback, backchannel)
    providers = [
        {
            "id": PROVIDER_ID,
            "name": "Test IdP",
            "issuer": idp.issuer,
            "client_id": "controlplane",
            "secret": "loopback-secret",
        }
    ]
    with django_db_blocker.unblock():
        server = DaphneServer(
            port=port, env=child_environment(OIDC_PROVIDERS=json.dumps(providers), MFA_REQUIRED_GROUPS="")
        )
    server.url = f"http://localhost:{port}"
    server.providers = providers
    yield server, idp
    server.stop()
    stop_process(idp.process)


def sign_in_through_the_provider(page, server, idp, *, asks_to_log_in: bool) -> None:
    page.goto(server.url + "/login/")
    page.click("button[data-provider=test-idp]")
    if asks_to_log_in:
        page.wait_for_url(idp.issuer + "/interaction/**")
        page.fill("input[name=login]", "sso-alice")
        page.fill("input[name=password]", "anything")
        page.locator("button[type=submit]").first.click()
        page.wait_for_load_state()
        if page.url.startswith(idp.issuer):  # its consent page
            page.locator("button[type=submit]").first.click()
    page.wait_for_url(server.url + "/")


def groups_of(username: str) -> set[str]:
    return set(get_user_model().objects.get(username=username).groups.values_list("name", flat=True))


def test_the_providers_groups_claim_decides_membership_at_every_sign_in(sso_site, new_context, people):
    server, idp = sso_site
    idp.grant("sso-alice", ["reviewers", "no-such-group"])
    page = new_context(base_url=server.url).new_page()
    sign_in_through_the_provider(page, server, idp, asks_to_log_in=True)
    assert groups_of("sso-alice") == {"reviewers"}

    idp.grant("sso-alice", [])
    page.click("header button:has-text('Sign out')")
    page.wait_for_url(server.url + "/login/")
    sign_in_through_the_provider(page, server, idp, asks_to_log_in=False)  # the provider remembers her
    assert groups_of("sso-alice") == set()

    changes = AuditEvent.objects.filter(verb="group.membership_changed").order_by("seq")
    assert [event.actor_label for event in changes][-2:] == [f"identity provider {PROVIDER_ID}"] * 2
    signed_in = AuditEvent.objects.filter(verb="auth.signed_in", actor_label="sso-alice")
    assert signed_in.count() == 2


# Every socket the page opens, with the code it closed with (the page reconnects on close).
WATCH_SOCKETS = """
window.socketCloses = [];
const NativeSocket = window.WebSocket;
window.WebSocket = function (...args) {
  const socket = new NativeSocket(...args);
  socket.addEventListener("close", (event) => window.socketCloses.push(event.code));
  return socket;
};
window.WebSocket.prototype = NativeSocket.prototype;
"""


def live_reviewer_page(new_context, server, idp):
    """sso-alice signed in through the provider, on the queue with its socket open."""
    context = new_context(base_url=server.url)
    context.add_init_script(WATCH_SOCKETS)
    page = context.new_page()
    sign_in_through_the_provider(page, server, idp, asks_to_log_in=True)
    page.locator("#live-status.is-live").wait_for()
    return context, page


def closed_by_the_server(page) -> None:
    """The open socket is closed with 4001 (its person changed), not dropped. Polled from
    here: the page's CSP (no eval) refuses wait_for_function's in-page polling."""
    deadline = time.monotonic() + 20  # bounds a hang only
    while not page.evaluate("window.socketCloses.includes(4001)"):
        assert time.monotonic() < deadline, f"the socket was not closed: {page.evaluate('window.socketCloses')}"
        page.wait_for_timeout(100)


def in_a_worker(function, **kwargs):
    """Run `function` in another thread, as the worker would: Playwright's event loop
    owns this one, and a socket close is sent with async_to_sync."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(function, **kwargs).result()


def test_a_group_dropped_at_the_provider_closes_the_socket_at_the_next_sign_in(sso_site, new_context, people, agent):
    server, idp = sso_site
    idp.grant("sso-alice", ["reviewers"])
    request = services.submit(
        services.Submission(
            kind=Kind.ACTION, action_type="send_email", params={"to": "a@example.com", "subject": "hi"}
        ),
        agent=agent,
    )
    _, page = live_reviewer_page(new_context, server, idp)
    assert groups_of("sso-alice") == {"reviewers"}
    page.locator(f"#row-{request.pk}").wait_for()  # hers to decide

    idp.grant("sso-alice", [])
    elsewhere = new_context(base_url=server.url).new_page()
    sign_in_through_the_provider(elsewhere, server, idp, asks_to_log_in=True)

    closed_by_the_server(page)
    assert groups_of("sso-alice") == set()
    refused = page.evaluate(
        API, {"url": f"/api/v1/requests/{request.pk}/decisions/", "body": {"decision": "approve", "revision": 1}}
    )
    assert refused["status"] in (403, 404), refused  # the open page can no longer decide
    assert ApprovalRequest.objects.get(pk=request.pk).state == State.PENDING_APPROVAL


def test_signing_out_at_the_provider_ends_the_session_here_at_once(sso_site, new_context, people):
    server, idp = sso_site
    idp.grant("sso-alice", ["reviewers"])
    context, page = live_reviewer_page(new_context, server, idp)

    at_provider = context.new_page()  # the same browser: the provider's session cookie
    at_provider.goto(idp.issuer + "/session/end")
    with at_provider.expect_navigation():
        at_provider.click("button[name=logout][value=yes]")
    assert "backchannel logout sent" in idp.log_path.read_text(), idp.log_path.read_text()

    closed_by_the_server(page)
    page.reload()
    assert page.url.startswith(server.url + "/login/")  # the session is gone
    event = AuditEvent.objects.filter(verb="auth.provider_signed_out").latest("seq")
    assert event.actor_label == f"identity provider {PROVIDER_ID}"
    assert event.metadata["reason"] == "backchannel_logout"
    assert event.metadata["sid_given"] is True and event.metadata["sessions_ended"] == 1


def test_a_person_the_provider_no_longer_knows_is_signed_out_by_the_recheck(sso_site, new_context, people, settings):
    server, idp = sso_site
    settings.SOCIALACCOUNT_PROVIDERS = social_providers(server.providers)  # the worker's settings
    idp.grant("sso-alice", ["reviewers"])
    _, page = live_reviewer_page(new_context, server, idp)

    idp.grant("sso-alice", ["reviewers"], disabled=True)
    counts = in_a_worker(
        recheck_provider_sessions, now=timezone.now() + timedelta(seconds=settings.SSO_RECHECK_SECONDS + 1)
    )

    assert counts["signed_out"] >= 1
    closed_by_the_server(page)
    page.reload()
    assert page.url.startswith(server.url + "/login/")
    event = AuditEvent.objects.filter(verb="auth.provider_signed_out").latest("seq")
    assert event.metadata["reason"] == "provider_refused"


API = """async ({ url, body }) => {
  const csrf = document.querySelector("meta[name=csrf-token]").content;
  const answer = await fetch(url, { method: "POST", body: JSON.stringify(body), headers: {
    "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf } });
  return { status: answer.status, body: await answer.json() };
}"""


def test_a_critical_decision_takes_a_fresh_sign_in_at_the_provider_made_for_it(
    sso_site, new_context, people, agent, admin_user
):
    server, idp = sso_site
    idp.grant("sso-alice", ["reviewers"])
    policy.save_rule(
        {"name": "transfers_critical", "priority": 5, "action_type": "transfer_funds", "risk_level": "critical"},
        actor=Person(admin_user),
        note="every transfer is critical",
    )
    a, b = (
        services.submit(
            services.Submission(
                kind=Kind.ACTION,
                action_type="transfer_funds",
                params={"amount": amount, "currency": "EUR"},
                target={"account": "ACME-OPS-001"},
            ),
            agent=agent,
        )
        for amount in (100, 200)
    )
    page = new_context(base_url=server.url).new_page()
    sign_in_through_the_provider(page, server, idp, asks_to_log_in=True)

    def call(url: str, body: dict) -> dict:
        return page.evaluate(API, {"url": url, "body": body})

    def decide(request, step_up=None) -> dict:
        return call(
            f"/api/v1/requests/{request.pk}/decisions/",
            {"decision": "approve", "revision": 1, **({"step_up": step_up} if step_up else {})},
        )

    bare = decide(a)
    assert bare["status"] == 403 and bare["body"]["details"]["method"] == "provider"
    challenge = call(
        "/api/v1/step-up/challenges/", {"decision": "approve", "requests": [{"id": str(a.pk), "revision": 1}]}
    )
    assert challenge["status"] == 200 and challenge["body"]["method"] == "provider"

    page.goto(challenge["body"]["redirect"] + "?next=/")
    page.wait_for_url(idp.issuer + "/interaction/**")  # prompt=login: asked again, signed in or not
    page.fill("input[name=login]", "sso-alice")
    page.fill("input[name=password]", "anything")
    page.locator("button[type=submit]").first.click()
    page.wait_for_url(server.url + "/")

    proof = {"method": "provider", "nonce": challenge["body"]["nonce"]}
    on_b = decide(b, proof)
    assert on_b["status"] == 403  # made for a, and spent by trying
    assert ApprovalRequest.objects.get(pk=b.pk).state == State.PENDING_APPROVAL

    challenge = call(
        "/api/v1/step-up/challenges/", {"decision": "approve", "requests": [{"id": str(a.pk), "revision": 1}]}
    )
    page.goto(challenge["body"]["redirect"] + "?next=/")
    page.wait_for_url(idp.issuer + "/interaction/**")
    page.fill("input[name=login]", "sso-alice")
    page.fill("input[name=password]", "anything")
    page.locator("button[type=submit]").first.click()
    page.wait_for_url(server.url + "/")
    on_a = decide(a, {"method": "provider", "nonce": challenge["body"]["nonce"]})

    assert on_a["status"] == 200 and on_a["body"]["state"] == "approved", on_a
    recorded = AuditEvent.objects.get(verb="decision.recorded", request_id=a.pk)
    assert (recorded.metadata["step_up"], recorded.metadata["step_up_credential"]) == ("provider", PROVIDER_ID)
    assert decide(a, {"method": "provider", "nonce": challenge["body"]["nonce"]})["status"] in (403, 409)


def test_the_cards_approve_button_asks_the_provider_in_a_window(sso_site, new_context, people, agent, admin_user):
    server, idp = sso_site
    idp.grant("sso-alice", ["reviewers"])
    policy.save_rule(
        {"name": "transfers_critical", "priority": 5, "action_type": "transfer_funds", "risk_level": "critical"},
        actor=Person(admin_user),
        note="every transfer is critical",
    )
    request = services.submit(
        services.Submission(
            kind=Kind.ACTION,
            action_type="transfer_funds",
            params={"amount": 300, "currency": "EUR"},
            target={"account": "ACME-OPS-001"},
        ),
        agent=agent,
    )
    context = new_context(base_url=server.url)
    page = context.new_page()
    sign_in_through_the_provider(page, server, idp, asks_to_log_in=True)

    select_card(page, request.pk)
    card = page.locator(f"#card-{request.pk}")
    card.get_by_text("signing in again at your identity provider").wait_for()
    card.locator(".approve-form button[type=submit]").click()
    with context.expect_page() as opened:
        confirm_decision(page)  # critical: asked explicitly first; the provider's window opens on the yes
    window = opened.value
    window.wait_for_url(idp.issuer + "/interaction/**")
    window.fill("input[name=login]", "sso-alice")
    window.fill("input[name=password]", "anything")
    window.locator("button[type=submit]").first.click()

    card.wait_for(
        state="detached"
    )  # held for the undo window, then sent  # the page saw the proof and sent the decision
    assert window.is_closed() or window.url == server.url + "/accounts/step-up/provider/done/"
    assert ApprovalRequest.objects.get(pk=request.pk).state == State.APPROVED
    recorded = AuditEvent.objects.get(verb="decision.recorded", request_id=request.pk)
    assert recorded.metadata["step_up"] == "provider"


def test_a_group_dropped_at_the_provider_closes_the_socket_at_the_next_recheck(sso_site, new_context, people, settings):
    server, idp = sso_site
    settings.SOCIALACCOUNT_PROVIDERS = social_providers(server.providers)
    idp.grant("sso-alice", ["reviewers"])
    _, page = live_reviewer_page(new_context, server, idp)

    idp.grant("sso-alice", [])
    in_a_worker(recheck_provider_sessions, now=timezone.now() + timedelta(seconds=settings.SSO_RECHECK_SECONDS + 1))

    closed_by_the_server(page)
    assert groups_of("sso-alice") == set()
    page.reload()
    assert page.url == server.url + "/"  # still signed in: the provider still knows her, with no groups
