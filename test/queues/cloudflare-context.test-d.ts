import type {
  ExecutionContext,
  ExportedHandler,
  ExportedHandlerQueueHandler,
  KVNamespace,
  Message,
  MessageBatch,
} from "@cloudflare/workers-types";
import { createRouter, type WebhookEvent } from "flag-webhooks";
import { consumeEvents, type EventBatch, type EventMessage } from "flag-webhooks/cloudflare";
import { describe, expectTypeOf, it } from "vitest";

// The consumer takes the runtime's own types: a router typed with Message and ExecutionContext,
// and a handler whose context is inferred from the Worker's ExportedHandler, with no cast.

interface Env {
  AUDIT: KVNamespace;
}

describe("consumeEvents with the runtime's context types", () => {
  it("takes a router typed with Message and ExecutionContext", () => {
    const router = createRouter<[message: Message<WebhookEvent>, env: Env, ctx: ExecutionContext]>().on(
      "flag.updated",
      async (event, message, env, ctx) => {
        expectTypeOf(message.timestamp).toEqualTypeOf<Date>();
        ctx.waitUntil(env.AUDIT.put(`flag:${event.data.flag}`, event.id));
      },
    );
    const queue = consumeEvents({ onEvent: router });
    expectTypeOf(queue).toExtend<ExportedHandlerQueueHandler<Env, WebhookEvent>>();
    expectTypeOf(queue).parameter(0).toEqualTypeOf<EventBatch<Message<WebhookEvent>>>();
    expectTypeOf<MessageBatch<WebhookEvent>>().toExtend<EventBatch<Message<WebhookEvent>>>();
  });

  it("infers the context from the Worker's handler type", () => {
    const worker = {
      queue: consumeEvents({
        onEvent(event, message, env, ctx) {
          expectTypeOf(ctx).toEqualTypeOf<ExecutionContext>();
          expectTypeOf(env).toEqualTypeOf<Env>();
          ctx.waitUntil(env.AUDIT.put(`event:${event.id}`, String(message.attempts)));
        },
      }),
    } satisfies ExportedHandler<Env, WebhookEvent>;
    expectTypeOf(worker.queue).toBeFunction();
  });

  it("keeps consumeEvents<Env> as before", () => {
    consumeEvents<Env>({
      onEvent(_event, message, env, ctx) {
        expectTypeOf(message).toEqualTypeOf<EventMessage>();
        expectTypeOf(env).toEqualTypeOf<Env>();
        expectTypeOf(ctx).toBeUnknown();
      },
    });
    consumeEvents<Env>({ onEvent: createRouter<[message: EventMessage, env: Env, ctx: unknown]>() });
  });
});
