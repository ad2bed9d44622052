// flag-webhooks/cloudflare: a dedupe store on Durable Objects and a hand-off to Cloudflare Queues,
// for receivers on Workers (issue 19). No runtime package: the bindings are the runtime's own,
// typed structurally here (@cloudflare/workers-types' types are assignable to them).
export { DedupeObject, type DedupeObjectState, type DedupeObjectStorage } from "./dedupe-object.js";
export {
  type DedupeNamespace,
  DurableObjectDedupeStore,
  type DurableObjectDedupeStoreOptions,
} from "./dedupe-store.js";
export {
  type ConsumeEventsOptions,
  consumeEvents,
  type EnqueueOptions,
  type EventBatch,
  type EventMessage,
  type EventQueue,
  enqueueTo,
} from "./queue.js";
