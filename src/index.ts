export { type ErrorBody, toErrorBody, WebhookError, type WebhookErrorCode } from "./errors.js";
export {
  type Actor,
  type FlagChange,
  type FlagCreatedEvent,
  type FlagDeletedEvent,
  type FlagUpdatedEvent,
  type KnownWebhookEvent,
  parseEvent,
  type RolloutGuardTriggeredEvent,
  type RolloutStepEvent,
  type UndocumentedData,
  type UnknownWebhookEvent,
  type WebhookEvent,
  type WebhookEventType,
} from "./events.js";
export type { Payload } from "./payload.js";
export { verifyEvent } from "./receive.js";
export type { ReceiverOptions } from "./receiver.js";
export {
  type Secret,
  SIGNATURE_HEADER,
  type SignOptions,
  sign,
  type VerifyOptions,
  verifySignature,
} from "./signature.js";
