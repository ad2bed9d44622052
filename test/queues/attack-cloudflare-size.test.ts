import { randomUUID } from "node:crypto";
import { parseEvent } from "flag-webhooks";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorker } from "../support/cloudflare-bundle.js";
import { signatureOf } from "../support/deliveries.js";

const SECRET = "whsec-cloudflare-attack";
let mf: Miniflare;
beforeAll(async () => {
  mf = await startWorker("test/fixtures/cloudflare/worker.ts", {
    bindings: { WEBHOOK_SECRET: SECRET },
    durableObjects: { DEDUPE: "TestDedupeObject" },
    queueProducers: { FLAG_EVENTS: "flag-events" },
    queueConsumers: { "flag-events": { maxBatchSize: 10, maxBatchTimeout: 0.05, maxRetries: 3, retryDelay: 0 } },
    kvNamespaces: ["SEEN"],
  });
}, 60_000);
afterAll(async () => {
  await mf?.dispose();
});

const utf8 = (text: string) => new TextEncoder().encode(text).length;
const bodyOf = (id: string, note: string) =>
  JSON.stringify({
    id,
    type: "flag.updated",
    createdAt: new Date().toISOString(),
    environment: "prod",
    data: {
      flag: "f",
      changes: [{ path: "on", from: false, to: true }],
      actor: { type: "user", email: "a@b.c" },
      note,
    },
  });
/** A body whose queue message (the parsed event's JSON) is `bytes` UTF-8 bytes, its note made of `unit` then x's. */
function sized(id: string, bytes: number, unit: string) {
  const base = utf8(JSON.stringify(parseEvent(bodyOf(id, ""))));
  const room = bytes - base;
  const units = Math.floor(room / utf8(JSON.stringify(unit).slice(1, -1)));
  let note = unit.repeat(units);
  note += "x".repeat(room - utf8(JSON.stringify(note).slice(1, -1)));
  const body = bodyOf(id, note);
  expect(utf8(JSON.stringify(parseEvent(body)))).toBe(bytes);
  return body;
}
async function deliver(body: string) {
  return mf.dispatchFetch("http://worker/webhooks", {
    method: "POST",
    headers: { "content-type": "application/json", "service-signature": await signatureOf(SECRET, body) },
    body,
  });
}
async function seen(id: string) {
  const kv = await mf.getKVNamespace("SEEN");
  return (await kv.list({ prefix: `seen:${id}:` })).keys.length;
}

// Attack on the 413 path: the limit is in UTF-8 bytes of the message's JSON, as the queue counts
// them, whatever the characters: 1 to 4 bytes each, a lone surrogate (JSON.stringify writes it as a
// 6-byte escape), a NUL (also escaped). Held: each is sent at exactly 127,900 bytes and refused at
// one byte more, through the Worker in workerd.
describe("the Cloudflare Queues hand-off's limit, in bytes whatever the characters", () => {
  const units = [
    ["ASCII", "x"],
    ["2-byte", "é"],
    ["3-byte", "€"],
    ["4-byte", "😀"],
    ["lone surrogate", "\ud800"],
    ["NUL", "\u0000"],
  ] as const;
  for (const [name, unit] of units) {
    it(`sends a ${name} event of 127,900 bytes as a message, once, and answers 413 to one of 127,901`, async () => {
      const id = `evt_${randomUUID()}`;
      expect((await deliver(sized(id, 127_900, unit))).status).toBe(202);
      expect((await deliver(sized(`${id}_over`, 127_901, unit))).status).toBe(413);
      await expect.poll(() => seen(id), { timeout: 10_000 }).toBe(1);
    });
  }
});
