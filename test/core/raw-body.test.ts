import type { WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";
import { rawBodyOf, wantsRawBody } from "../../src/raw-body.js";

// The seam by which an inbox that keeps events (enqueue) gets the exact bytes the receiver
// verified: only an onEvent marked as wanting them gets them, and it gets them byte for byte.

const secret = "whsec-raw-body";

async function deliver(onEvent: (event: WebhookEvent) => unknown, body: string) {
  const handler = webhookHandler({ secret, onEvent });
  return handler(await signedRequest({ secret, body }));
}

describe("the verified body, kept with its event", () => {
  it("goes with the event to an onEvent that wants it, byte for byte, and is invisible on the event", async () => {
    const body = `\uFEFF${JSON.stringify(createEvent("flag.updated", { id: "evt_raw" }), null, 1)}  `;
    let seen: WebhookEvent | undefined;
    const response = await deliver(
      wantsRawBody((event: WebhookEvent) => {
        seen = event;
      }),
      body,
    );
    expect(response.status).toBe(204);
    expect(rawBodyOf(seen as WebhookEvent)).toEqual(new TextEncoder().encode(body));
    expect(Object.keys(seen as object)).not.toContain("raw");
    expect(JSON.parse(JSON.stringify(seen))).toEqual(seen);
  });

  it("is not kept for any other onEvent: receivers that do not keep events pay nothing for it", async () => {
    let seen: WebhookEvent | undefined;
    await deliver(
      (event) => {
        seen = event;
      },
      JSON.stringify(createEvent("flag.updated")),
    );
    expect(seen).toBeDefined();
    expect(rawBodyOf(seen as WebhookEvent)).toBeUndefined();
    expect(Object.getOwnPropertySymbols(seen)).toEqual([]);
  });
});
