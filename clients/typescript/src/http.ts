/**
 * The client's transport: Node's global fetch, JSON in and out, the API's error codes as
 * ControlPlaneError, and retries with the same body (and so the same idempotency key) on
 * network errors and 502/503/504, as the Python client does.
 */

import { ControlPlaneError } from './errors.js';

export const USER_AGENT = 'hitl-controlplane-client-js/1';
const RETRYABLE_STATUSES = new Set([502, 503, 504]);

export interface TransportOptions {
  url: string;
  token: string;
  /** Seconds each request may take (a long-poll adds its wait). */
  timeout: number;
  retries: number;
  /** Seconds before the first retry; doubled each time, at most 10. */
  retryBackoff: number;
  fetch: typeof fetch;
}

export interface CallOptions {
  body?: unknown;
  headers?: Record<string, string>;
  /** Extra seconds the server may hold the answer (a long-poll's wait). */
  hold?: number;
  /** False for a call that must not be sent twice (a claim: a retry would look like a second claim). */
  retry?: boolean;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class Transport {
  readonly url: string;
  readonly #options: TransportOptions;

  constructor(options: TransportOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.#options = options;
  }

  async call<T = Record<string, unknown>>(method: string, path: string, options: CallOptions = {}): Promise<T> {
    const { timeout, retries, retryBackoff } = this.#options;
    const attempts = options.retry === false ? 0 : retries;
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.#options.fetch(this.url + path, {
          method,
          redirect: 'manual',
          signal: AbortSignal.timeout((timeout + (options.hold ?? 0)) * 1000),
          headers: {
            Authorization: `Bearer ${this.#options.token}`,
            'User-Agent': USER_AGENT,
            Accept: 'application/json',
            ...(options.body === undefined ? {} : { 'Content-Type': 'application/json' }),
            ...options.headers,
          },
          body: options.body === undefined ? undefined : JSON.stringify(options.body),
        });
      } catch (error) {
        if (attempt >= attempts) {
          const cause = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
          throw new ControlPlaneError('network_error', cause);
        }
        await sleep(Math.min(retryBackoff * 2 ** attempt, 10) * 1000);
        continue;
      }
      if (RETRYABLE_STATUSES.has(response.status) && attempt < attempts) {
        await response.body?.cancel();
        await sleep(Math.min(retryBackoff * 2 ** attempt, 10) * 1000);
        continue;
      }
      return (await answer(response)) as T;
    }
  }
}

async function answer(response: Response): Promise<unknown> {
  const text = await response.text();
  let body: unknown = {};
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = {};
  }
  if (response.ok) return body;
  const fields = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  throw new ControlPlaneError(
    typeof fields['code'] === 'string' ? fields['code'] : `http_${response.status}`,
    typeof fields['message'] === 'string' ? fields['message'] : response.statusText,
    { status: response.status, details: fields['details'] },
  );
}
