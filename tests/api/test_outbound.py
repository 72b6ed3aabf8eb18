"""The one outbound module: URL policy on parsed parts, refused address ranges, one
DNS resolution whose checked address is the one connected to, and one signature.

The resolver is the only thing faked (it is the outside world); every POST goes
to a real HTTP server on a loopback address.
"""

from __future__ import annotations

import datetime as dt
import ssl
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agents import callbacks
from approvals.execution.executors import webhook
from approvals.notifications import channels, dispatch
from controlplane.http import outbound
from controlplane.http.outbound import OutboundFailed, OutboundURLRefused, check_url, signed_post
from tests.live import free_port


class Listener:
    """An HTTP server on `address` recording each POST; answers `status`; with `tls`
    (an SSLContext) it speaks HTTPS and records the SNI name each client sent."""

    def __init__(self, address: str, port: int = 0, status: int = 200, tls: ssl.SSLContext | None = None) -> None:
        self.posts: list[dict] = []
        self.server_names: list[str | None] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                listener.posts.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", f"http://{address}:{self.server.server_address[1]}/elsewhere")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((address, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        if tls is not None:
            tls.sni_callback = lambda sock, name, context: listener.server_names.append(name)
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listeners():
    made: list[Listener] = []

    def make(address: str, port: int = 0, status: int = 200, tls: ssl.SSLContext | None = None) -> Listener:
        made.append(Listener(address, port, status, tls))
        return made[-1]

    yield make
    for listener in made:
        listener.close()


class Resolver:
    """Answers each lookup with the next list of addresses (the last one repeats)."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.lookups: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append((host, port))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


STRICT = {"allow_private": False, "allowed_networks": ()}
HOOKS = ["https://hooks.example.com/agent/"]


# --- The allow-list, on parsed parts ----------------------------------------------------------------


@pytest.mark.parametrize(
    "url, allowlist, code",
    [
        ("https://hooks.example.com.evil.net/agent/x", ["https://hooks.example.com"], "outbound_url_not_allowed"),
        ("https://hooks.example.com.evil.net/agent/x", ["hooks.example.com"], "outbound_url_not_allowed"),
        ("https://hooks.example.com/agent/../admin", HOOKS, "outbound_url_not_allowed"),
        ("https://hooks.example.com/agent/./../admin/", HOOKS, "outbound_url_not_allowed"),
        ("https://hooks.example.com/agents/x", ["https://hooks.example.com/agent"], "outbound_url_not_allowed"),
        ("https://hooks.example.com:8443/agent/x", HOOKS, "outbound_url_not_allowed"),
        ("http://hooks.example.com/agent/x", HOOKS, "outbound_url_not_allowed"),
        ("https://user@hooks.example.com/agent/x", HOOKS, "outbound_url_invalid"),
        ("https://user:pw@hooks.example.com/agent/x", HOOKS, "outbound_url_invalid"),
        ("https://evil.net\\@hooks.example.com/agent/x", HOOKS, "outbound_url_invalid"),
        ("https://hooks.example.com/agent/%2e%2e/admin", HOOKS, "outbound_url_invalid"),
        ("https://hooks.example.com/agent/..%2fadmin", HOOKS, "outbound_url_invalid"),
        ("https://hooks.example.com/agent/ x", HOOKS, "outbound_url_invalid"),
        ("file:///etc/passwd", HOOKS, "outbound_url_invalid"),
    ],
)
def test_the_allow_list_compares_scheme_host_port_and_normalized_path(url, allowlist, code):
    with pytest.raises(OutboundURLRefused) as refused:
        check_url(url, allowlist=allowlist, resolve=False, **STRICT)
    assert refused.value.code == code


@pytest.mark.parametrize(
    "url, allowlist, sent",
    [
        ("https://hooks.example.com/agent/1", HOOKS, "https://hooks.example.com:443/agent/1"),
        ("https://HOOKS.example.com/agent/x/../2?a=1", HOOKS, "https://hooks.example.com:443/agent/2?a=1"),
        ("https://hooks.example.com/agent", ["https://hooks.example.com/agent"], "https://hooks.example.com:443/agent"),
        (
            "https://hooks.example.com:443/agent/1",
            ["https://hooks.example.com:443/agent/"],
            "https://hooks.example.com:443/agent/1",
        ),
        ("http://a.b.example.com:8080/x", ["*.example.com"], "http://a.b.example.com:8080/x"),
    ],
)
def test_an_allowed_url_is_sent_as_it_was_checked(url, allowlist, sent):
    assert check_url(url, allowlist=allowlist, resolve=False, **STRICT).url == sent


# --- Refused addresses ------------------------------------------------------------------------------

REFUSED = [
    "127.0.0.1",
    "10.0.0.5",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.2.1",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:10.0.0.1",  # IPv4-mapped
    "2002:7f00:1::",
    "2002:a9fe:a9fe::",
    "2002:808:808::",  # 6to4, even of a public IPv4
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b:1::a00:1",  # NAT64
    "::7f00:1",
    "::a9fe:a9fe",  # IPv4-compatible
]


@pytest.mark.parametrize("address", REFUSED)
def test_special_addresses_are_refused_whatever_the_name_resolves_to(address):
    resolver = Resolver([address])
    with pytest.raises(OutboundURLRefused) as refused:
        check_url("https://hooks.example.com/agent/1", allowlist=HOOKS, resolver=resolver, **STRICT)
    assert refused.value.code == "outbound_url_private"
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(OutboundURLRefused):  # and as a literal in the URL
        check_url(f"http://{host}/x", allowlist=[address], resolve=False, **STRICT)


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700:4700::1111", "::ffff:93.184.216.34"])
def test_public_addresses_pass(address):
    assert outbound.address_refusal(address, allow_private=False) is None


def test_one_refused_address_among_the_answers_refuses_the_url():
    resolver = Resolver(["93.184.216.34", "127.0.0.1"])
    with pytest.raises(OutboundURLRefused):
        check_url("https://hooks.example.com/agent/1", allowlist=HOOKS, resolver=resolver, **STRICT)


# --- One resolution, the checked address connected to ---------------------------------------------


def test_a_resolver_answering_public_then_loopback_cannot_redirect_the_post(listeners):
    # 127.0.0.2 stands in for a public address (explicitly allowed); 127.0.0.1 is refused.
    public = listeners("127.0.0.2")
    loopback = listeners("127.0.0.1", public.port)
    resolver = Resolver(["127.0.0.2"], ["127.0.0.1"])
    answer = signed_post(
        f"http://hooks.test:{public.port}/hook",
        b"{}",
        secret="s",
        timeout=5,
        resolver=resolver,
        allowlist=["hooks.test"],
        allow_private=False,
        allowed_networks=["127.0.0.2/32"],
    )
    assert answer.status_code == 200
    assert len(resolver.lookups) == 1
    assert loopback.posts == []
    [post] = public.posts
    assert post["headers"]["Host"] == f"hooks.test:{public.port}"


def test_a_resolver_answering_loopback_first_is_refused_before_connecting(listeners):
    loopback = listeners("127.0.0.1")
    resolver = Resolver(["127.0.0.1"], ["127.0.0.2"])
    with pytest.raises(OutboundURLRefused):
        signed_post(
            f"http://hooks.test:{loopback.port}/hook",
            b"{}",
            secret="s",
            timeout=5,
            resolver=resolver,
            allowlist=["hooks.test"],
            allow_private=False,
            allowed_networks=["127.0.0.2/32"],
        )
    assert loopback.posts == []


def _certificate_for(name: str, directory) -> tuple[str, str]:
    """A self-signed certificate naming only `name`: (certificate path, key path)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_path), str(key_path)


def test_tls_to_the_pinned_address_verifies_and_names_the_original_host(listeners, tmp_path):
    cert, key = _certificate_for("hooks.test", tmp_path)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    receiver = listeners("127.0.0.1", tls=server_tls)
    trusting = ssl.create_default_context(cafile=cert)
    policy = {"allowlist": ["hooks.test"], "allow_private": True, "verify": trusting}

    answer = signed_post(
        f"https://hooks.test:{receiver.port}/hook",
        b"{}",
        secret="s",
        timeout=5,
        resolver=Resolver(["127.0.0.1"]),
        **policy,
    )
    assert answer.status_code == 200
    assert receiver.server_names == ["hooks.test"]
    assert receiver.posts[0]["headers"]["Host"] == f"hooks.test:{receiver.port}"

    # A name the certificate does not carry fails verification, though the address is the same.
    with pytest.raises(OutboundFailed):
        signed_post(
            f"https://other.test:{receiver.port}/hook",
            b"{}",
            secret="s",
            timeout=5,
            resolver=Resolver(["127.0.0.1"]),
            **{**policy, "allowlist": ["other.test"]},
        )
    assert len(receiver.posts) == 1


# --- The signed POST ----------------------------------------------------------------------------


def test_the_post_is_signed_once_with_one_header_spelling(listeners):
    receiver = listeners("127.0.0.1")
    body = b'{"event":"request.changed"}'
    answer = signed_post(
        f"http://127.0.0.1:{receiver.port}/hook",
        body,
        secret="agent-secret",
        timeout=5,
        headers={"Idempotency-Key": "k1"},
        allowlist=["127.0.0.1"],
        allow_private=True,
    )
    assert (answer.status_code, answer.body) == (200, b"ok")
    [post] = receiver.posts
    headers = post["headers"]
    assert post["body"] == body and headers["Idempotency-Key"] == "k1"
    assert outbound.verify_signature(
        "agent-secret", headers["X-Controlplane-Timestamp"], body, headers["X-Controlplane-Signature"]
    )
    assert not outbound.verify_signature(
        "other-secret", headers["X-Controlplane-Timestamp"], body, headers["X-Controlplane-Signature"]
    )
    stale = int(headers["X-Controlplane-Timestamp"]) + 301
    assert not outbound.verify_signature(
        "agent-secret", headers["X-Controlplane-Timestamp"], body, headers["X-Controlplane-Signature"], now=stale
    )


def test_a_redirect_is_answered_not_followed(listeners):
    receiver = listeners("127.0.0.1", status=302)
    answer = signed_post(
        f"http://127.0.0.1:{receiver.port}/hook",
        b"{}",
        secret="s",
        timeout=5,
        allowlist=["127.0.0.1"],
        allow_private=True,
    )
    assert answer.is_redirect and len(receiver.posts) == 1


def test_nobody_listening_fails_as_not_sent():
    with pytest.raises(OutboundFailed) as failed:
        signed_post(
            f"http://127.0.0.1:{free_port()}/hook",
            b"{}",
            secret="s",
            timeout=5,
            allowlist=["127.0.0.1"],
            allow_private=True,
        )
    assert failed.value.sent is False


def test_backoff_doubles_up_to_the_cap_within_the_jitter():
    assert [outbound.backoff(n, base=5, cap=60, jitter=0) for n in (1, 2, 3, 5)] == [
        timedelta(seconds=s) for s in (5, 10, 20, 60)
    ]
    assert timedelta(seconds=8) <= outbound.backoff(2, base=5, cap=60) <= timedelta(seconds=12)


def test_the_three_senders_share_the_module():
    for sender in (callbacks, webhook, channels):
        assert sender.signed_post is outbound.signed_post
    for module in (callbacks, webhook, channels, dispatch):
        assert not hasattr(module, "sign") and not hasattr(module, "SIGNATURE_HEADER")
        assert not hasattr(module, "httpx")
