/** A decided request: what to resume the agent with, and the submissions' shapes. */

import type { Json, SubmittedCall } from './decisions.js';

/** A submission the server accepted: its request id, the answer, and the call as this client made it. */
export interface Submitted {
  readonly id: string;
  readonly request: Json;
  readonly call: SubmittedCall;
}

export class Resume {
  readonly requestId: string;
  readonly state: string;
  /** An action's or plan's `{action, ...}`; a suspension's answer itself, or null when refused. */
  readonly resumeData: unknown;
  /** The text the model reads. */
  readonly toolResult: string;
  readonly raw: Json;
  /** The verified signed decision document; null when no key is pinned (nothing could be checked). */
  readonly decision: Json | null;
  /** The call the decision was checked against, when this client knew it. */
  readonly call: SubmittedCall | null;

  constructor(raw: Json, decision: Json | null, call: SubmittedCall | null) {
    this.raw = raw;
    this.requestId = String(raw['request_id']);
    this.state = String(raw['state']);
    this.resumeData = raw['resume_data'] ?? null;
    this.toolResult = typeof raw['tool_result'] === 'string' ? raw['tool_result'] : '';
    this.decision = decision;
    this.call = call;
  }

  #data(): Json {
    const data = this.resumeData;
    return typeof data === 'object' && data !== null && !Array.isArray(data) ? (data as Json) : {};
  }

  get kind(): string | null {
    const kind = this.decision?.['kind'] ?? this.call?.kind;
    return typeof kind === 'string' ? kind : null;
  }

  /** An action or plan approved; a suspension answered. */
  get approved(): boolean {
    if (this.kind === 'suspension') return this.resumeData !== null;
    return this.#data()['action'] === 'approved';
  }

  get feedback(): string {
    const feedback = this.#data()['feedback'] ?? this.raw['feedback'];
    return typeof feedback === 'string' ? feedback : '';
  }

  /** A reviewer's reply in place of the tool (`action: responded`): what the model reads instead. */
  get reply(): string {
    const message = this.#data()['message'];
    return typeof message === 'string' ? message : '';
  }

  /** The exact approved params (actions), possibly edited by a reviewer. */
  get params(): Json {
    const params = this.#data()['params'];
    return typeof params === 'object' && params !== null && !Array.isArray(params) ? (params as Json) : {};
  }
}
