export type { Position } from "./delivery/order/position.js";
export type { FlagPositions } from "./delivery/order/rule.js";
export { createRouter, type EventHandler, type EventOf, type RoutableType, type Router } from "./delivery/router.js";
export { type ErrorBody, toErrorBody, WebhookError, type WebhookErrorCode, type WebhookErrorStatus } from "./errors.js";
export {
  type Actor,
  type FlagChange,
  type FlagCreatedEvent,
  type FlagDeletedEvent,
  type FlagField,
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
export type {
  DedupeOptions,
  HandlerOptions,
  ReceiverOptions,
  VerifiedInfo,
  WebhookReply,
} from "./receiver/options.js";
export { type OrderOptions, STALE_HEADER } from "./receiver/order.js";
export {
  type Secret,
  SIGNATURE_HEADER,
  type SignOptions,
  sign,
  type VerifyOptions,
  verifySignature,
} from "./signature.js";
export type { ClaimResult, DedupeStore } from "./store-contract/dedupe-store.js";
export { DUPLICATE_HEADER } from "./store-contract/enlist.js";
export type { OrderHold, OrderStore } from "./store-contract/order-store.js";
export { MemoryDedupeStore, type MemoryDedupeStoreOptions } from "./stores/memory.js";
export { MemoryOrderStore, type MemoryOrderStoreOptions } from "./stores/order/memory.js";
export { RedisOrderStore, type RedisOrderStoreOptions } from "./stores/order/redis.js";
export { type RedisClientLike, RedisDedupeStore, type RedisDedupeStoreOptions } from "./stores/redis.js";
export type {
  DeliveryTelemetry,
  InboxTelemetry,
  KeptAttemptResult,
  QueueTelemetry,
  StoreOperation,
  Telemetry,
} from "./telemetry.js";
export { type VerifyEventOptions, verifyEvent } from "./verify-event.js";
