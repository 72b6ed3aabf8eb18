"""Single sign-on through a real OpenID Connect provider on loopback (the `oidc-provider`
package, tests/identity/idp/), driven through the browser: a person the provider puts in
`reviewers` lands in that group; when the provider drops the group, their next sign-in
takes it away (audited, with the provider as the actor)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from audit.models import AuditEvent
from tests.live import DaphneServer, child_environment, free_port, stop_process

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

IDP = Path(__file__).resolve().parent.parent / "identity" / "idp"
PROVIDER_ID = "test-idp"


class LoopbackIdP:
    """tests/identity/idp/server.mjs on a free port; `grant(account, groups)` rewrites its claims."""

    def __init__(self, tmp: Path, callback: str) -> None:
        if not (IDP / "node_modules").exists():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=IDP, check=True, capture_output=True)
        self.port = free_port()
        self.issuer = f"http://localhost:{self.port}"
        self.accounts = tmp / "accounts.json"
        self.grant("sso-alice", [])
        self.process = subprocess.Popen(
            ["node", "server.mjs"], cwd=IDP, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={"PATH": "/usr/bin:/bin", "PORT": str(self.port), "CLIENT_ID": "controlplane",
                 "CLIENT_SECRET": "loopback-secret", "REDIRECT_URI": callback, "ACCOUNTS_FILE": str(self.accounts)},
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

    def grant(self, account: str, groups: list[str]) -> None:
        self.accounts.write_text(json.dumps({account: {"groups": groups}}))


@pytest.fixture(scope="module")
def sso_site(django_db_setup, django_db_blocker, tmp_path_factory):
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    port = free_port()
    callback = f"http://localhost:{port}/accounts/oidc/{PROVIDER_ID}/login/callback/"
    idp = LoopbackIdP(tmp_path_factory.mktemp("idp"), callback)
    providers = [{"id": PROVIDER_ID, "name": "Test IdP", "issuer": idp.issuer, "client_id": "controlplane",
                  "secret": "loopback-secret"}]
    with django_db_blocker.unblock():
        server = DaphneServer(port=port, env=child_environment(OIDC_PROVIDERS=json.dumps(providers),
                                                               MFA_REQUIRED_GROUPS=""))
    server.url = f"http://localhost:{port}"
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
