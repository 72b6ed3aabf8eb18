/** The client's errors besides DecisionRefused (decisions.ts), as the Python client names them. */

/** The server refused (`code` is the API's stable error code) or could not be reached (`network_error`). */
export class ControlPlaneError extends Error {
  override name = 'ControlPlaneError';
  readonly code: string;
  readonly status: number | null;
  readonly details: unknown;

  constructor(code: string, message: string, options: { status?: number | null; details?: unknown } = {}) {
    super(`${code}: ${message}`);
    this.code = code;
    this.status = options.status ?? null;
    this.details = options.details;
  }
}

/** No decision arrived within the caller's timeout; the request is still pending. */
export class ApprovalTimeout extends ControlPlaneError {
  override name = 'ApprovalTimeout';
}

/** What ApprovalRejected needs to know of a decided request. */
export interface RejectedResume {
  readonly state: string;
  readonly feedback: string;
  readonly reply: string;
}

/** The request was rejected (or expired, or was cancelled, or answered instead). `feedback` says why. */
export class ApprovalRejected extends ControlPlaneError {
  override name = 'ApprovalRejected';
  readonly resume: RejectedResume;
  readonly feedback: string;
  readonly state: string;

  constructor(resume: RejectedResume) {
    const reason = resume.feedback || (resume.reply ? `a reviewer replied instead: ${resume.reply}` : 'no feedback given');
    super('rejected', `${resume.state}: ${reason}`);
    this.resume = resume;
    this.feedback = resume.feedback;
    this.state = resume.state;
  }
}
