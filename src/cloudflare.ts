// flag-webhooks/cloudflare: a dedupe store and an order store on Durable Objects, and a hand-off to Cloudflare Queues,
// for receivers on Workers. No runtime package: the bindings are the runtime's own,
// typed structurally here (@cloudflare/workers-types' types are assignable to them).

export {
  type ConsumeEventsOptions,
  consumeEvents,
  type EnqueueOptions,
  type EventBatch,
  type EventMessage,
  type EventQueue,
  enqueueTo,
} from "./queues/cloudflare.js";
export { DedupeObject, type DedupeObjectState, type DedupeObjectStorage } from "./stores/durable-object/object.js";
export { OrderObject } from "./stores/durable-object/order-object.js";
export { DurableObjectOrderStore, type DurableObjectOrderStoreOptions } from "./stores/durable-object/order-store.js";
export {
  type DedupeNamespace,
  DurableObjectDedupeStore,
  type DurableObjectDedupeStoreOptions,
} from "./stores/durable-object/store.js";
