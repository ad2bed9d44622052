import type { WebhookEvent } from "../events.js";

/** The `type` values a router can route: every known type, and `"unknown"` for newer ones. */
export type RoutableType = WebhookEvent["type"];

/** The event whose `type` is `Type`, narrowed from the {@link WebhookEvent} union. */
export type EventOf<Type extends RoutableType> = Extract<WebhookEvent, { type: Type }>;

/** A handler for events narrowed to `Event`; `Context` is what the adapter passes after the event. */
export type EventHandler<Event extends WebhookEvent, Context extends unknown[]> = (
  event: Event,
  ...context: Context
) => unknown;

/**
 * A typed event router, and itself a valid `onEvent` for every adapter. Handlers of the event's
 * type run in the order they were added, then the `onAny` handlers; each is awaited. The router
 * resolves with the first value a handler returned (a `Response`, say), or `undefined`. An event
 * no handler matches is accepted and ignored.
 */
export interface Router<Context extends unknown[] = []> {
  (event: WebhookEvent, ...context: Context): Promise<unknown>;
  /** Handles one type, or a list of types; the handler gets the event narrowed to them. */
  on<Type extends RoutableType>(type: Type | readonly Type[], handler: EventHandler<EventOf<Type>, Context>): this;
  /** Handles every event, after the handlers of its type. */
  onAny(handler: EventHandler<WebhookEvent, Context>): this;
}

/**
 * Creates a typed {@link Router}: `on("flag.updated", fn)` gives `fn` a `FlagUpdatedEvent`, no
 * casts; a misspelt type does not compile. Events of types this version does not know arrive as
 * `"unknown"` (with `originalType`). Pass the router as `onEvent` to any adapter.
 *
 * @example
 * ```ts
 * const router = createRouter()
 *   .on("flag.updated", (event) => console.log(event.data.actor.email, event.data.changes))
 *   .on(["flag.created", "flag.deleted"], (event) => console.log(event.type, event.data))
 *   .on("unknown", (event) => console.warn("new event type", event.originalType));
 * app.post("/webhooks", webhookMiddleware({ secret, onEvent: router }));
 * ```
 */
export function createRouter<Context extends unknown[] = []>(): Router<Context> {
  const byType = new Map<string, EventHandler<WebhookEvent, Context>[]>();
  const any: EventHandler<WebhookEvent, Context>[] = [];

  const router = async function routeEvent(event: WebhookEvent, ...context: Context): Promise<unknown> {
    let answer: unknown;
    for (const handler of [...(byType.get(event.type) ?? []), ...any]) {
      const value = await handler(event, ...context);
      if (answer === undefined) answer = value;
    }
    return answer;
  } as Router<Context>;

  router.on = (type, handler) => {
    assertHandler(handler);
    // Only a string or an array: anything else (a number, say) is not iterable, and would fail
    // with the engine's message instead of ours.
    for (const one of typeof type === "string" ? [type] : Array.isArray(type) ? type : [undefined]) {
      if (typeof one !== "string")
        throw new TypeError("flag-webhooks: router.on() takes an event type or a list of them");
      const list = byType.get(one) ?? [];
      list.push(handler as EventHandler<WebhookEvent, Context>);
      byType.set(one, list);
    }
    return router;
  };
  router.onAny = (handler) => {
    assertHandler(handler);
    any.push(handler);
    return router;
  };
  return router;
}

function assertHandler(handler: unknown): void {
  if (typeof handler !== "function") throw new TypeError("flag-webhooks: a router handler must be a function");
}
