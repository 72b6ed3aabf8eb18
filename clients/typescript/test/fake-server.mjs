// A loopback stand-in for the control plane's agent API, signing decisions and grants as the
// server does (decision v2, grant v1) with a key made here; `tamper` hooks rewrite answers the
// way someone between the agent and the server could. The live tests (tests/client) use the
// real server; this one lets the handshake's every branch run in a second.
import { createServer } from 'node:http';
import { generateKeyPairSync, randomUUID, sign } from 'node:crypto';

import {
  SubmittedCall,
  grantMessage,
  signedMessage,
  signedPayload,
  toolResultSha256,
  valueSha256,
} from '../dist/index.js';

export function makeKey() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const x = publicKey.export({ format: 'jwk' }).x;
  return { publicText: `ed25519:${x}`, privateKey, keyId: null };
}

const iso = (ms) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export async function fakeServer({ key, agent = { id: 7, name: 'pay-bot' }, leaseMs = 2000, edits = {}, tamper = {}, grantNonce = null }) {
  const { keyIdOf } = await import('../dist/index.js');
  const keyId = keyIdOf(Buffer.from(key.publicText.slice('ed25519:'.length), 'base64url'));
  const signBlock = (message, document) => ({
    algorithm: 'ed25519',
    key_id: keyId,
    signed: document,
    signature: sign(null, message, key.privateKey).toString('base64url'),
  });
  const state = { requests: new Map(), seen: [], claims: 0, renewals: 0, completions: [], failNext: 0 };

  function decisionPayload(request) {
    const resumeData = { action: 'approved', params: { ...request.params, ...edits } };
    const toolResult = 'Approved. Proceed with exactly these params.';
    const document = {
      type: 'hitl-controlplane/decision',
      v: 2,
      kind: 'action',
      agent,
      request_id: request.id,
      revision: request.revision,
      action_type: request.call.actionType,
      idempotency_key: request.call.idempotencyKey,
      tool_call_id: request.call.toolCallId,
      submitted_sha256: request.call.submittedSha256,
      verdict: 'approved',
      payload_sha256: valueSha256(signedPayload(resumeData)),
      tool_result_sha256: toolResultSha256(toolResult),
      execute_by: iso(Date.now() + 3600_000),
    };
    request.approved = resumeData.params;
    return {
      request_id: request.id,
      state: request.state,
      decided: true,
      resume_data: resumeData,
      tool_result: toolResult,
      decision_signature: signBlock(signedMessage(document), document),
    };
  }

  function claim(request, body) {
    if (state.failClaim) return [409, state.failClaim];
    if (request.claimed) return [409, { code: 'already_claimed', message: 'Another executor claimed this request first.' }];
    request.claimed = true;
    request.state = 'executing';
    request.leaseUntil = Date.now() + leaseMs;
    state.claims++;
    const decision = decisionPayload(request).decision_signature.signed;
    const document = {
      type: 'hitl-controlplane/grant',
      v: 1,
      request_id: request.id,
      revision: request.revision,
      agent,
      action_type: decision.action_type,
      params_sha256: decision.payload_sha256,
      idempotency_key: `cp-${request.id}-r${request.revision}`,
      nonce: grantNonce ?? body.nonce, // grantNonce: a genuine grant made for another claim
      attempt: 1,
      lease_until: iso(request.leaseUntil),
    };
    return [
      200,
      {
        request_id: request.id,
        token: `grant-${request.id}`,
        idempotency_key: document.idempotency_key,
        params: request.approved,
        lease_until: document.lease_until,
        attempt: 1,
        revision: request.revision,
        grant_signature: signBlock(grantMessage(document), document),
      },
    ];
  }

  function route(method, path, headers, body) {
    const match = /^\/api\/v1\/requests\/([^/]+)\/(?:([a-z]+)\/)?$/.exec(path.split('?')[0]);
    if (method === 'POST' && path === '/api/v1/actions/') {
      const key = headers['idempotency-key'];
      const existing = [...state.requests.values()].find((r) => r.key === key);
      if (existing) return [201, { id: existing.id, state: existing.state }];
      const request = {
        id: randomUUID(),
        key,
        revision: Object.keys(edits).length ? 2 : 1,
        state: 'approved',
        params: body.params,
        call: SubmittedCall.action(body.action_type, body.params, { idempotencyKey: key, toolCallId: body.tool_call_id }),
      };
      state.requests.set(request.id, request);
      return [201, { id: request.id, state: 'pending_approval' }];
    }
    if (method === 'GET' && path.startsWith('/api/v1/requests/?')) {
      const key = new URLSearchParams(path.split('?')[1]).get('idempotency_key');
      const results = [...state.requests.values()].filter((r) => r.key === key).map((r) => ({ id: r.id, state: r.state }));
      return [200, { results }];
    }
    const request = match && state.requests.get(match[1]);
    if (!request) return [404, { code: 'not_found', message: 'No such request.' }];
    const token = body?.token === `grant-${request.id}`;
    switch (`${method} ${match[2] ?? ''}`) {
      case 'GET ':
        return [200, { id: request.id, state: request.state, resolution_code: request.resolution ?? '' }];
      case 'GET resume':
        return [200, decisionPayload(request)];
      case 'POST claim':
        return claim(request, body);
      case 'POST renew':
        if (!token) return [409, { code: 'invalid_grant', message: 'Wrong token.' }];
        if (Date.now() > request.leaseUntil) return [409, { code: 'lease_expired', message: 'The lease ran out.' }];
        state.renewals++;
        request.leaseUntil = Date.now() + leaseMs;
        return [200, { request_id: request.id, lease_until: iso(request.leaseUntil) }];
      case 'POST complete':
        if (!token) return [409, { code: 'invalid_grant', message: 'Wrong token.' }];
        state.completions.push(body);
        request.state = body.succeeded ? 'succeeded' : 'failed';
        return [200, { id: request.id, state: request.state }];
      default:
        return [405, { code: 'method_not_allowed', message: method }];
    }
  }

  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk) => (text += chunk));
    req.on('end', () => {
      const body = text ? JSON.parse(text) : undefined;
      state.seen.push({ method: req.method, path: req.url, headers: req.headers, body });
      let [status, answer] = state.failNext > 0 ? (state.failNext--, [503, { code: 'unavailable', message: 'x' }]) : route(req.method, req.url, req.headers, body);
      const name = `${req.method} ${req.url.split('?')[0].split('/').filter(Boolean).at(-1)}`;
      if (tamper[name] && status < 300) answer = tamper[name](answer, state) ?? answer;
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    state,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
