"""Several daphne processes behind one address serve one client: the gateway keeps no
per-process session state, so each HTTP request may land on another process."""

from __future__ import annotations

import itertools

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from approvals.models import ApprovalRequest
from approvals.states import State

from .test_gateway import ERAS, run, text_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]


class RoundRobin(httpx2.AsyncBaseTransport):
    """A load balancer in the client: each HTTP request goes to the next server's port."""

    def __init__(self, ports: list[int]) -> None:
        self._next = itertools.cycle(ports)
        self._inner = httpx2.AsyncHTTPTransport()
        self.served: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self._next)
        self.served.append(port)
        request.url = request.url.copy_with(port=port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.mark.parametrize("mode", ERAS)
def test_one_clients_requests_are_served_by_two_processes_in_turn(
    gateway_server, second_gateway_server, token, gateway_rules, upstream_calls, mode
):
    balancer = RoundRobin([gateway_server.port, second_gateway_server.port])

    async def session():
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, transport=balancer, timeout=httpx2.Timeout(60)
        )
        url = f"{gateway_server.url}/mcp/"
        async with http, Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            first = await client.call_tool("demo.add", {"a": 1, "b": 2})
            second = await client.call_tool("demo.echo", {"text": "again"})
            return names, first, second

    names, first, second = run(session())

    assert "demo.add" in names and "demo.delete_everything" not in names
    assert (text_of(first), text_of(second)) == ("3", "echo: again")
    assert set(balancer.served) == {gateway_server.port, second_gateway_server.port}
    assert [tool for tool, _ in upstream_calls()] == ["add", "echo"]
    assert set(ApprovalRequest.objects.values_list("state", flat=True)) == {State.SUCCEEDED}
