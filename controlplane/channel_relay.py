"""The embedded default's cross-process channel layer: a loopback relay into daphne.

Without Redis, the web process (daphne) keeps Channels' in-memory layer, where
reviewers' sockets and agents' long-polls wait. The worker, beat, the demo agent
and commands cannot reach that memory, so in those processes this layer's
`group_send`/`send` POST the message to daphne's `/internal/channel-relay/`
endpoint instead, which hands it to its in-memory layer. A process relays only
when ``CHANNEL_RELAY_URL`` is set (``manage.py runstack`` sets it for every child
except daphne); without it the layer is exactly the in-memory one.

The endpoint accepts only loopback peers and bodies signed with a key derived
from SECRET_KEY, carrying a timestamp no older than RELAY_MAX_AGE_SECONDS.
Delivery is at-most-once, like every channel message here: a message sent while
daphne is down is dropped and clients resync from REST. With REDIS_URL the
settings use channels_redis instead and none of this runs. Scaling past one
machine is Redis, never this relay.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import urllib.request
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

__all__ = ["RELAY_PATH", "RelayChannelLayer", "relay_endpoint", "relay_key", "sign"]

logger = logging.getLogger(__name__)

RELAY_PATH = "/internal/channel-relay/"
SIGNATURE_HEADER = "X-Relay-Signature"
RELAY_MAX_AGE_SECONDS = 60
RELAY_TIMEOUT_SECONDS = 3.0
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def relay_key() -> bytes:
    """The relay's signing key, derived so it is never SECRET_KEY itself."""
    return hmac.new(settings.SECRET_KEY.encode(), b"controlplane.channel_relay", hashlib.sha256).digest()


def sign(body: bytes) -> str:
    return hmac.new(relay_key(), body, hashlib.sha256).hexdigest()


def relay_url() -> str:
    """Where this process relays to, or "" when it delivers to its own memory."""
    return settings.CHANNEL_RELAY_URL


class RelayChannelLayer(InMemoryChannelLayer):
    """In-memory layer in the web process; a loopback relay to it everywhere else."""

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        url = relay_url()
        if not url:
            return await super().group_send(group, message)
        await asyncio.to_thread(_post, url, {"op": "group_send", "target": group, "message": message})

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        url = relay_url()
        if not url:
            return await super().send(channel, message)
        await asyncio.to_thread(_post, url, {"op": "send", "target": channel, "message": message})


def _post(url: str, payload: dict[str, Any]) -> None:
    body = json.dumps({**payload, "ts": int(time.time())}, separators=(",", ":")).encode()
    request = urllib.request.Request(
        url.rstrip("/") + RELAY_PATH,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", SIGNATURE_HEADER: sign(body)},
    )
    try:
        with urllib.request.urlopen(request, timeout=RELAY_TIMEOUT_SECONDS) as response:
            response.read()
    except OSError as exc:  # at-most-once: a screen that missed it resyncs from REST
        logger.warning("channel relay to %s failed: %s", url, exc)


@csrf_exempt
async def relay_endpoint(request: HttpRequest) -> HttpResponse:
    """Receive one relayed message and deliver it to this process's in-memory layer."""
    layer = get_channel_layer()
    if not isinstance(layer, RelayChannelLayer) or relay_url():
        return JsonResponse({"code": "not_found", "message": "No channel relay here."}, status=404)
    if request.method != "POST":
        return JsonResponse({"code": "method_not_allowed", "message": "POST only."}, status=405)
    if request.META.get("REMOTE_ADDR") not in LOOPBACK:
        return JsonResponse({"code": "forbidden", "message": "Loopback only."}, status=403)
    body = request.body
    if not hmac.compare_digest(request.headers.get(SIGNATURE_HEADER, ""), sign(body)):
        return JsonResponse({"code": "bad_signature", "message": "The relay signature does not match."}, status=403)
    try:
        payload = json.loads(body)
        op, target, message, ts = payload["op"], payload["target"], payload["message"], int(payload["ts"])
    except (ValueError, KeyError, TypeError):
        return JsonResponse({"code": "invalid", "message": "Malformed relay message."}, status=400)
    if abs(time.time() - ts) > RELAY_MAX_AGE_SECONDS:
        return JsonResponse({"code": "stale", "message": "The relay message is too old."}, status=403)
    if op == "group_send":
        await layer.group_send(target, message)
    elif op == "send":
        await layer.send(target, message)
    else:
        return JsonResponse({"code": "invalid", "message": f"Unknown op {op!r}."}, status=400)
    return HttpResponse(status=204)
