"""The MCP approval gateway: an MCP server at `/mcp/` in front of upstream MCP servers.

Agents reach their tools only through it; each call is a request in the state
machine, classified by the same rules, and the gateway runs approved calls itself
through the execution handshake. Read docs/mcp.md first. The modules:

- `config`: the upstreams, from the deploy-time file `MCP_UPSTREAMS_FILE`;
- `upstreams`: one open SDK client per upstream and process (stdio or HTTP, the
  latter under the outbound rules);
- `calls`: the synchronous side: listing under the policy, submitting, claiming and
  completing as the agent;
- `held`: held calls: the retry key and window, the results kept for retries, the
  answers of decided requests;
- `server`: the MCP server (stateless Streamable HTTP) and its handlers;
- `asgi`: `/mcp/` in the ASGI app, behind the agent's token;
- `demo_upstream`: a small stdio MCP server to try it with (and test it against).
"""
