/**
 * hitl-controlplane: the TypeScript client of the HITL control plane (Node >= 20, no dependencies).
 *
 *     import { ControlPlane } from 'hitl-controlplane';
 *     const cp = new ControlPlane();                       // $CONTROLPLANE_URL, _TOKEN, _PUBLIC_KEYS
 *     const resume = await cp.requestApproval({ actionType: 'transfer_funds', params: { amount: 90 } });
 *     const outcome = await cp.runApproved(resume, (params) => transfer(params));
 */

export { normalizeActionType, caseFold } from './actiontype.js';
export { asSent, canonicalBytes, valueBytes, valueSha256, type JsonValue } from './canonical.js';
export {
  AGENT_ENV,
  ControlPlane,
  PUBLIC_KEYS_ENV,
  newIdempotencyKey,
  type ActionInput,
  type ControlPlaneOptions,
  type Correlation,
  type PlanInput,
  type SuspensionInput,
  type WaitOptions,
} from './client.js';
export {
  ALGORITHM,
  CONTEXT,
  DOCUMENT_TYPE,
  DecisionRefused,
  SubmittedCall,
  signedMessage,
  signedPayload,
  submittedSha256,
  toolResultSha256,
  verifyDecision,
  type Json,
  type Kind,
  type VerifyDecisionOptions,
} from './decisions.js';
export { keyIdOf, keysFromEnvironment, parsePublicKey, trustedKeys, verifyBytes, type TrustedKeys } from './ed25519.js';
export { ApprovalRejected, ApprovalTimeout, ControlPlaneError } from './errors.js';
export { GRANT_CONTEXT, GRANT_TYPE, GRANT_VERSION, grantMessage, newNonce, verifyGrant } from './grant.js';
export { runApproved, type RunOptions, type RunOutcome } from './handshake.js';
export { Resume, type Submitted } from './resume.js';
export { runTool, toolIdempotencyKey, type ToolCall } from './tools.js';
