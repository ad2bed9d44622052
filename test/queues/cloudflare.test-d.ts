import type {
  DurableObjectNamespace,
  DurableObjectState,
  ExecutionContext,
  ExportedHandlerQueueHandler,
  Message,
  MessageBatch,
  Queue,
} from "@cloudflare/workers-types";
import { createRouter, type DedupeStore, type WebhookEvent, type WebhookReply } from "flag-webhooks";
import {
  consumeEvents,
  type DedupeNamespace,
  DedupeObject,
  type DedupeObjectState,
  DurableObjectDedupeStore,
  type EventBatch,
  type EventMessage,
  type EventQueue,
  enqueueTo,
} from "flag-webhooks/cloudflare";
import { webhookHandler } from "flag-webhooks/fetch";
import { describe, expectTypeOf, it } from "vitest";

// flag-webhooks/cloudflare types its bindings structurally; the runtime's own types, from
// @cloudflare/workers-types, must fit them with no cast and no `any`.
interface Env {
  DEDUPE: DurableObjectNamespace;
  FLAG_EVENTS: Queue<WebhookEvent>;
  RAW: Queue;
  WEBHOOK_SECRET: string;
}
declare const env: Env;

describe("flag-webhooks/cloudflare types", () => {
  it("takes the runtime's Durable Object namespace, state and Queue bindings as they are", () => {
    expectTypeOf<DurableObjectNamespace>().toExtend<DedupeNamespace>();
    expectTypeOf<DurableObjectState>().toExtend<DedupeObjectState>();
    expectTypeOf<Queue<WebhookEvent>>().toExtend<EventQueue>();
    expectTypeOf<Queue>().toExtend<EventQueue>();
    expectTypeOf<MessageBatch>().toExtend<EventBatch>();
    expectTypeOf<Message>().toExtend<EventMessage>();
    const store = new DurableObjectDedupeStore(env.DEDUPE, { scope: "flag-audit", shards: 32 });
    expectTypeOf(store).toExtend<DedupeStore>();
    // @ts-expect-error scope is required
    new DurableObjectDedupeStore(env.DEDUPE, {});
    new DedupeObject({} as DurableObjectState, env);
  });

  it("gives an onEvent for the fetch handler, and a queue handler the runtime accepts", () => {
    const onEvent = enqueueTo(env.FLAG_EVENTS, { timeout: "2s" });
    expectTypeOf(onEvent).toEqualTypeOf<(event: WebhookEvent) => Promise<WebhookReply>>();
    webhookHandler({ secret: env.WEBHOOK_SECRET, onEvent: enqueueTo(env.RAW) });
    const queue = consumeEvents<Env>({
      onEvent(event, message, own) {
        expectTypeOf(message).toEqualTypeOf<EventMessage>();
        expectTypeOf(own).toEqualTypeOf<Env>();
        if (event.type === "flag.updated") expectTypeOf(event.data.changes).toBeArray();
      },
    });
    expectTypeOf(queue).toExtend<ExportedHandlerQueueHandler<Env, unknown>>();
    queue({} as MessageBatch, env, {} as ExecutionContext);
    // A router with the queue handler's context fits as onEvent.
    consumeEvents<Env>({
      onEvent: createRouter<[EventMessage, Env, unknown]>().on("flag.updated", (event, message) => {
        expectTypeOf(event.data.flag).toEqualTypeOf<string>();
        message.retry({ delaySeconds: 30 });
      }),
    });
  });
});
