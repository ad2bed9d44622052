import { WebhookError } from "../errors.js";
import type { WebhookEvent } from "../events.js";
import type { Payload } from "../payload.js";
import { delivering, type Enlisted, replyOutcome } from "../store-contract/enlist.js";
import type { OrderHold } from "../store-contract/order-store.js";
import { andThen, isThenable } from "../util/thenable.js";
import { duplicateAnswer, errorResponse, isStatus, replyAnswer } from "./answers.js";
import { checkBody, checkRequest } from "./checks.js";
import { type Claim, type ClaimOutcome, claimEvent } from "./claim.js";
import { checkOptions, type HandlerOptions, type Settings } from "./options.js";
import { claimWithHold, orderDelivery, staleAnswer } from "./order.js";
import type { AdapterHooks, Answer, Delivery, NativeReply, Receiver, ReturnHooks } from "./protocol.js";
import { Reporter } from "./report.js";
import { type Settlement, settlement, settleStale } from "./settle.js";
import { recorder } from "./telemetry.js";

/**
 * The one decision-maker behind every adapter: checks the options once, then turns each request
 * into an answer, always in the same order: method (405), signature present (401, before any
 * byte of the body is read), body (500/413/408), signature (401), event (400), replay window
 * (401), dedupe claim (duplicate 204, in progress 409, store down 503), handler (204/500).
 * Whether a delivery counts as handled is decided once, in its settlement (./settle.ts).
 * Adapters only translate: a request in, what happened and the answer out.
 *
 * @param hooks what the adapter knows of answers it writes itself.
 */
export function createReceiver<Context extends unknown[]>(
  options: HandlerOptions<Context>,
  hooks: ReturnHooks,
): Receiver<Context, Answer | NativeReply>;
export function createReceiver<Context extends unknown[]>(
  options: HandlerOptions<Context>,
  hooks?: AdapterHooks<Context>,
): Receiver<Context>;
export function createReceiver<Context extends unknown[]>(
  options: HandlerOptions<Context>,
  hooks: AdapterHooks<Context> = {},
): Receiver<Context> {
  const pipeline = new Pipeline(checkOptions(options), hooks);
  return {
    accept: (delivery, ...context) => pipeline.accept(delivery, context, pipeline.begin(context)),
    verify: (delivery, ...context) => pipeline.verify(delivery, context),
    handle: (delivery, ...context) => pipeline.handle(delivery, context),
  };
}

/** The steps of a delivery, in the order they run. */
class Pipeline<Context extends unknown[]> {
  constructor(
    private readonly settings: Settings<Context>,
    private readonly hooks: AdapterHooks<Context>,
  ) {}

  /** What the receiver keeps of one delivery while it checks it: where to report, what to record. */
  begin(context: Context): Reporter {
    const begun = new Reporter(this.settings.onError, context);
    if (this.settings.telemetry) begun.record = recorder(this.settings.telemetry, begun);
    return begun;
  }

  /**
   * The path up to the handler. It takes no promise of its own but for a body still arriving, an
   * HMAC that is asynchronous (Web Crypto) and a dedupe claim; every step answers through `refuse`.
   */
  accept(delivery: Delivery, context: Context, begun: Reporter): Settlement | Answer | Promise<Settlement | Answer> {
    let body: Payload | Promise<Payload>;
    try {
      checkRequest(delivery);
      body = delivery.body(this.settings.limit, this.settings.bodyTimeout);
    } catch (error) {
      return this.refuse(error, begun);
    }
    return andThen(
      body,
      (payload) => this.checked(payload, delivery, context, begun),
      (error) => this.refuse(error, begun),
    );
  }

  /** Answers a refusal: reported (a bug) or told to `onRejected` (a bad delivery), and recorded. */
  private refuse(error: unknown, begun: Reporter, recordEnd = true): Answer {
    const answer = errorResponse(error);
    const { onRejected } = this.settings;
    if (!(error instanceof WebhookError)) begun.report(error);
    else if (onRejected) begun.tell(() => onRejected(error));
    if (recordEnd) begun.record?.end(error instanceof WebhookError ? error.code : "handler_error", answer.status);
    return answer;
  }

  private checked(
    payload: Payload,
    delivery: Delivery,
    context: Context,
    begun: Reporter,
  ): Settlement | Answer | Promise<Settlement | Answer> {
    let event: WebhookEvent | Promise<WebhookEvent>;
    try {
      event = checkBody(payload, delivery.signature, this.settings, ({ event, secretIndex }) => {
        begun.record?.verified(event, secretIndex);
        const { onVerified } = this.settings;
        if (onVerified) begun.tell(() => onVerified(event, { secretIndex }));
      });
    } catch (error) {
      return this.refuse(error, begun);
    }
    return andThen(
      event,
      (authentic) => this.claimed(authentic, context, begun),
      (error) => this.refuse(error, begun),
    );
  }

  private claimed(
    event: WebhookEvent,
    context: Context,
    begun: Reporter,
  ): Settlement | Answer | Promise<Settlement | Answer> {
    const { dedupe, order } = this.settings;
    if (!dedupe) return this.ordered(event, undefined, context, begun);
    // With stores that can, the claim holds the event's flag in the same request.
    const paired = order && claimWithHold(event, dedupe, order);
    const outcome = claimEvent(event.id, paired?.dedupe ?? dedupe, begun, begun.record);
    // A store that answered at once (the memory store) goes on at once, no closure made for it.
    if (!isThenable(outcome)) return this.onClaim(outcome, event, context, begun, paired);
    return outcome.then(
      (settled) => this.onClaim(settled, event, context, begun, paired),
      (error: unknown) => this.refuse(error, begun),
    );
  }

  /** Goes on with what the claim gave: a duplicate's answer, a refusal, or the delivery accepted. */
  private onClaim(
    outcome: ClaimOutcome,
    event: WebhookEvent,
    context: Context,
    begun: Reporter,
    paired: ReturnType<typeof claimWithHold>,
  ): Settlement | Answer | Promise<Settlement | Answer> {
    if (outcome === "duplicate") {
      begun.record?.end("duplicate", 204);
      return duplicateAnswer();
    }
    if (outcome instanceof WebhookError) return this.refuse(outcome, begun);
    return this.ordered(event, outcome, context, begun, paired?.held());
  }

  /** With `order`: the flag's positions held, the handler sees only what is fresh (./order.ts). */
  private ordered(event: WebhookEvent, claim: Claim | undefined, context: Context, begun: Reporter, held?: OrderHold) {
    const { order } = this.settings;
    if (!order) return this.accepted(event, claim, context, begun);
    return orderDelivery(event, order, held).then(
      async (ordered) => {
        if (!ordered.stale) return this.accepted(ordered.event, claim, context, begun, ordered.unit);
        // Nothing newer to apply: handled without the handler, the new reset position (if any) kept.
        return (await settleStale(ordered, claim, begun)) ?? staleAnswer();
      },
      async (error: unknown) => {
        await claim?.release();
        return this.refuse(error, begun);
      },
    );
  }

  /**
   * A delivery handed to its handler: an adapter that watches the wire watches it from the start if
   * there is anything to settle (a claim, an inbox's transaction, ordered positions, a record), and
   * the receiver calls back into the adapter no more. Only an inbox called inside `onEvent` is found later.
   */
  private accepted(
    event: WebhookEvent,
    claim: Claim | undefined,
    context: Context,
    begun: Reporter,
    unit?: Enlisted,
  ): Settlement {
    const { watch } = this.hooks;
    const watched =
      watch !== undefined &&
      (claim !== undefined || this.settings.inbox !== undefined || begun.record !== undefined || unit !== undefined);
    const delivery = settlement(event, claim, begun, this.settings.maxAge, watched ? undefined : watch);
    if (watched) watch(delivery, ...context);
    if (unit) delivery.enlist(unit);
    return delivery;
  }

  async handle(delivery: Delivery, context: Context): Promise<Answer | NativeReply | undefined> {
    const begun = this.begin(context);
    const accepted = await this.accept(delivery, context, begun);
    if (!("event" in accepted)) return accepted;
    let value: unknown;
    try {
      value = await this.run(accepted, context);
    } catch (error) {
      accepted.finished(error === undefined ? new Error("onEvent threw undefined") : error);
      // A WebhookError keeps its own answer (a queue hand-off's store_unavailable, say); anything
      // else is reported, and the client gets the generic handler_error: the handler's own
      // message may hold internals (refuse does both).
      const answer = this.refuse(error, begun, false);
      return this.settled(accepted, answer.status, answer);
    }
    accepted.finished();
    const outcome = replyOutcome(value);
    if (outcome) accepted.recordAs(outcome);
    // The final answer: one the handler gave through the framework stands; else a native result
    // or a reply it returned; else 204. A result that cannot be answered as it is, is a handler
    // failure (500), decided before any store records the event.
    let answer: Answer;
    try {
      if (this.hooks.answered?.(...context)) return undefined;
      const status = this.hooks.native?.(value);
      if (status !== undefined) {
        if (!isStatus(status)) {
          throw new TypeError("flag-webhooks: onEvent returned a result with no valid HTTP status to answer with");
        }
        return await this.settled(accepted, status, { native: value });
      }
      answer = replyAnswer(value);
    } catch (error) {
      begun.report(error);
      answer = errorResponse(undefined);
    }
    return this.settled(accepted, answer.status, answer);
  }

  /**
   * Runs `onEvent` in the delivery: an inbox's own handler is handed the delivery to enlist in.
   * Meanwhile the delivery is in the registry, where an inbox that `onEvent` calls finds it (a
   * router's handler, the app's own function, an inbox's handler that calls another inbox).
   */
  private run(accepted: Settlement, context: Context): unknown {
    const { event } = accepted;
    const { inbox, onEvent } = this.settings;
    const handler = inbox
      ? () => inbox.run(accepted, event, ...context)
      : // Stryker disable next-line OptionalChaining: equivalent: handle() is called only when onEvent was given.
        () => onEvent?.(event, ...context);
    return delivering(event, accepted, () => accepted.run(handler));
  }

  /**
   * The answer to write once `onEvent` ended. An adapter that watches the wire reports the answer
   * itself when it is written; for the others the receiver reports it here and waits for the
   * decision, which may put another answer in its place.
   */
  private async settled<T extends Answer | NativeReply>(delivery: Settlement, status: number, reply: T) {
    if (this.hooks.watch) return reply;
    return (await delivery.answered(status)) ?? reply;
  }

  async verify(delivery: Delivery, context: Context): Promise<WebhookEvent> {
    const reporter = new Reporter(this.settings.onError, context);
    const { onVerified, onRejected } = this.settings;
    try {
      checkRequest(delivery);
      const body = await delivery.body(this.settings.limit, this.settings.bodyTimeout);
      return await checkBody(body, delivery.signature, this.settings, ({ event, secretIndex }) => {
        if (onVerified) reporter.tell(() => onVerified(event, { secretIndex }));
      });
    } catch (error) {
      if (error instanceof WebhookError && onRejected) reporter.tell(() => onRejected(error));
      throw error;
    }
  }
}
