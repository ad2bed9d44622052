import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseEvent, sign, verifySignature, WebhookError } from "../src/index.js";

// Bounded property tests (issue 4); `npm run fuzz` runs the same properties over a million inputs.
const secrets = fc.string({ unit: "binary", minLength: 1, maxLength: 80 });
const bodies = fc.uint8Array({ maxLength: 2048 });
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

function flipBit(bytes: Uint8Array, bit: number): Uint8Array {
  const copy = Uint8Array.from(bytes);
  const index = bit >> 3;
  copy[index] = (copy[index] ?? 0) ^ (1 << (bit & 7));
  return copy;
}

describe("signature properties", () => {
  it("verifies what it signed, for any bytes and any secret", async () => {
    await fc.assert(
      fc.asyncProperty(secrets, bodies, async (secret, payload) => {
        const signature = await sign({ secret, payload });
        expect(signature).toMatch(/^[0-9a-f]{64}$/);
        expect(await verifySignature({ secret, payload, signature })).toBe(true);
      }),
    );
  });

  it("rejects any single-bit flip of the body", async () => {
    await fc.assert(
      fc.asyncProperty(
        secrets,
        bodies.filter((b) => b.length > 0),
        fc.nat(),
        async (secret, payload, n) => {
          const signature = await sign({ secret, payload });
          const flipped = flipBit(payload, n % (payload.length * 8));
          expect(await verifySignature({ secret, payload: flipped, signature })).toBe(false);
        },
      ),
    );
  });

  it("rejects any single-bit flip of the signature's bytes", async () => {
    await fc.assert(
      fc.asyncProperty(secrets, bodies, fc.nat(255), async (secret, payload, bit) => {
        const signature = await sign({ secret, payload });
        const flipped = hex(flipBit(Buffer.from(signature, "hex"), bit));
        expect(await verifySignature({ secret, payload, signature: flipped })).toBe(false);
      }),
    );
  });

  it("rejects any single-bit flip of the secret's bytes", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 64 }),
        bodies,
        fc.nat(),
        async (secret, payload, n) => {
          const signature = await sign({ secret, payload });
          const bytes = new TextEncoder().encode(secret);
          // Stay within 7-bit ASCII so the flipped secret is still the same number of bytes.
          const bit = (n % bytes.length) * 8 + (n % 7);
          const other = new TextDecoder().decode(flipBit(bytes, bit));
          expect(await verifySignature({ secret: other, payload, signature })).toBe(false);
        },
      ),
    );
  });

  it("never throws and never verifies for an arbitrary header", async () => {
    const headers = fc.oneof(
      fc.string({ unit: "binary", maxLength: 200 }),
      fc.stringMatching(/^[0-9a-fA-F]{60,68}$/),
      fc.array(fc.string(), { maxLength: 3 }),
      fc.constantFrom(null, undefined),
      fc.anything(),
    );
    await fc.assert(
      fc.asyncProperty(secrets, bodies, headers, async (secret, payload, signature) => {
        const ok = await verifySignature({ secret, payload, signature: signature as string });
        expect(ok).toBe(false);
      }),
    );
  });
});

describe("parsing properties", () => {
  const envelope = {
    id: "evt_1",
    type: "flag.updated",
    createdAt: "2026-11-21T09:30:00Z",
    environment: "production",
    data: { flag: "f", changes: [{ path: "on", from: false, to: true }], actor: { type: "user", email: "a@b.c" } },
  };

  function eventOrInvalidPayload(payload: string | Uint8Array): void {
    try {
      const event = parseEvent(payload);
      expect(typeof event.id).toBe("string");
      expect(typeof event.type).toBe("string");
    } catch (error) {
      expect(error).toBeInstanceOf(WebhookError);
      expect((error as WebhookError).code).toBe("invalid_payload");
    }
  }

  it("turns arbitrary bytes into an event or invalid_payload, never another exception", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 512 }), eventOrInvalidPayload));
  });

  it("turns arbitrary JSON into an event or invalid_payload", () => {
    fc.assert(fc.property(fc.json(), eventOrInvalidPayload));
  });

  it("turns events with any field replaced by any JSON value into an event or invalid_payload", () => {
    const paths = [
      "id",
      "type",
      "createdAt",
      "environment",
      "data",
      "data.flag",
      "data.changes",
      "data.actor",
      "data.actor.email",
    ];
    fc.assert(
      fc.property(fc.constantFrom(...paths), fc.jsonValue(), (path, value) => {
        const event = structuredClone(envelope) as Record<string, any>;
        const keys = path.split(".");
        const last = keys.pop() as string;
        let owner = event;
        for (const key of keys) owner = owner[key];
        owner[last] = value;
        eventOrInvalidPayload(JSON.stringify(event));
      }),
    );
  });
});
