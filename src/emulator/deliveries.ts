import { createHash, randomBytes } from "node:crypto";
import { SIGNATURE_HEADER, sign } from "../signature.js";
import type { StoredWebhook } from "./store.js";

/**
 * How the emulator retries a delivery. The spec does not show the service's policy, so this is
 * the emulator's own: exponential backoff without jitter, so runs are reproducible.
 */
export interface RetryPolicy {
  /** Attempts in all, the first included. Default 5. */
  attempts?: number;
  /** Wait before the second attempt; each later wait doubles. Default 1000 ms. */
  initialDelayMs?: number;
  /** Longest wait between two attempts. Default 60 000 ms. */
  maxDelayMs?: number;
  /** An attempt without a complete response by then fails (and is retried). Default 10 000 ms. */
  timeoutMs?: number;
}

/** One HTTP request of a delivery and what came back. */
export interface DeliveryAttempt {
  /** 1 for the first attempt. */
  number: number;
  startedAt: string;
  durationMs: number;
  /** The response's status; absent when no response came (timeout, connection error). */
  status?: number;
  /** The response's headers, names in lowercase (e.g. `webhook-duplicate: true` from a dedupe). */
  responseHeaders?: Record<string, string>;
  /** The response body as text, at most 16 KiB. */
  responseBody?: string;
  /** Why no response came, e.g. `"timeout after 10000 ms"` or `"ECONNREFUSED"`. */
  error?: string;
}

/**
 * One event sent to one webhook, with every attempt. `redelivery` resends an earlier delivery
 * as it was (same event id, same signature); `tampered` sends it with a changed body and the
 * original signature, which a receiver must refuse (it is never retried).
 */
export interface Delivery {
  id: string;
  kind: "event" | "redelivery" | "tampered";
  /** The delivery this one copies, for `redelivery` and `tampered`. */
  of?: string;
  project: string;
  webhookId: string;
  url: string;
  event: { id: string; type: string; environment: string };
  createdAt: string;
  /** What is POSTed, byte for byte: the headers (signature included) and the JSON body. */
  request: { headers: Record<string, string>; body: string };
  attempts: DeliveryAttempt[];
  /** `pending` until a 2xx answer (`succeeded`), the last failed attempt (`failed`), or the webhook's deletion (`cancelled`). */
  state: "pending" | "succeeded" | "failed" | "cancelled";
  /** When the next attempt is due, while `pending` and waiting. */
  nextAttemptAt?: string;
}

const RESPONSE_LIMIT = 16 * 1024;

/** Sends deliveries and retries them; every change of a delivery is reported through `changed`. */
export class Sender {
  readonly deliveries = new Map<string, Delivery>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly inFlight = new Map<string, AbortController>();
  private readonly waiters: (() => void)[] = [];
  private closed = false;
  private preparing = 0;
  /** Deliveries in `pending` state, so settled() needs no walk of the history. */
  private pending = 0;
  readonly policy: Required<RetryPolicy>;

  constructor(
    policy: RetryPolicy,
    private readonly changed: (delivery: Delivery) => void,
    private readonly now: () => Date,
    /** How many deliveries to keep; the oldest finished ones are forgotten first. */
    private readonly limit = 1000,
  ) {
    this.policy = {
      attempts: policy.attempts ?? 5,
      initialDelayMs: policy.initialDelayMs ?? 1000,
      maxDelayMs: policy.maxDelayMs ?? 60_000,
      timeoutMs: policy.timeoutMs ?? 10_000,
    };
  }

  /** Signs `body` with the webhook's secret (the library's own `sign`) and sends it. */
  async send(webhook: StoredWebhook, project: string, event: Delivery["event"], body: string): Promise<Delivery> {
    // Counted as pending while it is signed, so settled() cannot resolve between an API call and its delivery.
    this.preparing++;
    let signature: string;
    try {
      signature = await sign({ secret: webhook.secret, payload: body });
    } finally {
      this.preparing--;
    }
    return this.start({
      id: `dlv_${randomBytes(8).toString("hex")}`,
      kind: "event",
      project,
      webhookId: webhook.id,
      url: webhook.url,
      event,
      createdAt: this.now().toISOString(),
      request: {
        headers: {
          "content-type": "application/json",
          [SIGNATURE_HEADER]: signature,
          "user-agent": "flag-webhooks-emulator",
        },
        body,
      },
      attempts: [],
      state: "pending",
    });
  }

  /** Sends a copy of an earlier delivery: as it was, or tampered (body changed, signature kept). */
  copy(original: Delivery, kind: "redelivery" | "tampered"): Delivery {
    let body = original.request.body;
    if (kind === "tampered") {
      // Any change of a signed byte must be refused; an added field is easy to spot on the page.
      body = `${body.replace(/}\s*$/, "")},"tampered":true}`;
    }
    return this.start({
      ...structuredClone(original),
      id: `dlv_${randomBytes(8).toString("hex")}`,
      kind,
      of: original.id,
      createdAt: this.now().toISOString(),
      request: { headers: { ...original.request.headers }, body },
      attempts: [],
      state: "pending",
    });
  }

  private start(delivery: Delivery): Delivery {
    this.keep(delivery);
    this.changed(delivery);
    void this.attempt(delivery);
    return delivery;
  }

  /**
   * Picks up a delivery loaded from the state file. A pending one gets its next attempt at once:
   * its schedule was made by an emulator that is gone, and the app may be waiting for it.
   */
  restore(delivery: Delivery): void {
    this.keep(delivery);
    if (delivery.state === "pending") this.schedule(delivery, 0);
  }

  /**
   * Adds a delivery to the history, then forgets the oldest finished ones beyond the limit.
   * Pending deliveries are never forgotten (they finish within the retry policy's time).
   */
  private keep(delivery: Delivery): void {
    this.deliveries.set(delivery.id, delivery);
    if (delivery.state === "pending") this.pending++;
    let excess = this.deliveries.size - this.limit;
    for (const [id, old] of this.deliveries) {
      if (excess <= 0) break;
      if (old.state === "pending") continue;
      this.deliveries.delete(id);
      excess--;
    }
  }

  /** A pending delivery finished (succeeded, failed or cancelled). */
  private finished(): void {
    this.pending--;
  }

  private schedule(delivery: Delivery, delayMs: number): void {
    delivery.nextAttemptAt = new Date(this.now().getTime() + delayMs).toISOString();
    const timer = setTimeout(() => {
      this.timers.delete(delivery.id);
      void this.attempt(delivery);
    }, delayMs);
    this.timers.set(delivery.id, timer);
  }

  private async attempt(delivery: Delivery): Promise<void> {
    if (this.closed || delivery.state !== "pending") return;
    delete delivery.nextAttemptAt;
    const controller = new AbortController();
    this.inFlight.set(delivery.id, controller);
    const timeout = setTimeout(() => controller.abort(), this.policy.timeoutMs);
    const startedAt = this.now().toISOString();
    const attempt: DeliveryAttempt = { number: delivery.attempts.length + 1, startedAt, durationMs: 0 };
    const started = performance.now();
    let succeeded = false;
    try {
      const response = await fetch(delivery.url, {
        method: "POST",
        // W3C Trace Context: every attempt of a delivery in one trace (its id derived from the
        // delivery's, so a restored delivery keeps it), a new parent span id per attempt.
        headers: { ...delivery.request.headers, traceparent: traceparent(delivery.id) },
        body: delivery.request.body,
        // A redirect is a failed attempt: the service posts to the registered URL only.
        redirect: "manual",
        signal: controller.signal,
      });
      attempt.status = response.status;
      succeeded = response.ok;
      attempt.responseHeaders = Object.fromEntries(response.headers);
      attempt.responseBody = await readText(response);
    } catch (error) {
      // Only the timeout's abort is recorded: after a cancel or close the attempt's outcome is not.
      attempt.error = controller.signal.aborted ? `timeout after ${this.policy.timeoutMs} ms` : describe(error);
    } finally {
      clearTimeout(timeout);
      this.inFlight.delete(delivery.id);
    }
    attempt.durationMs = Math.round((performance.now() - started) * 10) / 10;
    // Deleted webhook or closed emulator while this attempt was on the wire: its outcome changes nothing.
    if (delivery.state !== "pending" || this.closed) return;
    delivery.attempts.push(attempt);
    if (succeeded) {
      delivery.state = "succeeded";
      this.finished();
    } else if (delivery.kind === "tampered" || delivery.attempts.length >= this.policy.attempts) {
      delivery.state = "failed";
      this.finished();
    } else {
      const wait = Math.min(this.policy.initialDelayMs * 2 ** (delivery.attempts.length - 1), this.policy.maxDelayMs);
      this.schedule(delivery, wait);
    }
    this.changed(delivery);
    this.wake();
  }

  /** Spec section 3: deleting a webhook stops its deliveries at once, an attempt on the wire included. */
  cancel(webhookId: string): void {
    for (const delivery of this.deliveries.values()) {
      if (delivery.webhookId !== webhookId || delivery.state !== "pending") continue;
      delivery.state = "cancelled";
      this.finished();
      delete delivery.nextAttemptAt;
      clearTimeout(this.timers.get(delivery.id));
      this.timers.delete(delivery.id);
      this.inFlight.get(delivery.id)?.abort();
      this.changed(delivery);
    }
    this.wake();
  }

  /** Resolves once no delivery is pending (every one succeeded, failed or was cancelled). */
  settled(): Promise<void> {
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.wake();
    });
  }

  private wake(): void {
    if (this.preparing > 0 || this.pending > 0) return;
    for (const resolve of this.waiters.splice(0)) resolve();
  }

  /** Stops every timer and aborts every attempt; pending deliveries stay pending (and are saved). */
  close(): void {
    this.closed = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const controller of this.inFlight.values()) controller.abort();
    for (const resolve of this.waiters.splice(0)) resolve();
  }
}

async function readText(response: Response): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  // At exactly the limit, one more read would change nothing: the text is cut at the limit below.
  // Stryker disable next-line EqualityOperator: one read more at the limit is cut off alike
  while (size < RESPONSE_LIMIT) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
  }
  await reader.cancel().catch(() => {});
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, RESPONSE_LIMIT));
}

/** Why fetch gave no response: the system's error code (`ECONNREFUSED`), else a message. */
function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
}

/** A W3C `traceparent` for one attempt: the delivery's trace, a fresh span id, sampled. */
function traceparent(deliveryId: string): string {
  const traceId = createHash("sha256").update(deliveryId).digest("hex").slice(0, 32);
  return `00-${traceId}-${randomBytes(8).toString("hex")}-01`;
}
