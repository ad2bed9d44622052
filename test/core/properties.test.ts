import fc from "fast-check";
import { parseEvent, sign, verifySignature, WebhookError } from "flag-webhooks";
import { describe, expect, it } from "vitest";

// Bounded property tests; `npm run fuzz` runs the same properties over a million inputs.
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

/**
 * The oracle for createdAt: the spec's grammar as a capturing pattern, and a date-time the
 * calendar has, by the JavaScript clock (a real one survives setUTCFullYear and setUTCHours
 * unchanged; 30 February rolls over to 2 March, second 60 to the next minute).
 */
function realTimestamp(text: string): boolean {
  const match = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.\d+)?(?:Z|\+00:00)$/.exec(text);
  if (!match) return false;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const clock = new Date(0);
  clock.setUTCFullYear(year, month - 1, day);
  clock.setUTCHours(hour, minute, second);
  return (
    clock.getUTCFullYear() === year &&
    clock.getUTCMonth() === month - 1 &&
    clock.getUTCDate() === day &&
    clock.getUTCHours() === hour &&
    clock.getUTCMinutes() === minute &&
    clock.getUTCSeconds() === second
  );
}

describe("createdAt properties", () => {
  const withCreatedAt = (createdAt: string) =>
    JSON.stringify({
      id: "evt_1",
      type: "rollout.step",
      createdAt,
      environment: "production",
      data: {},
    });
  const MESSAGE = "createdAt must be an ISO 8601 UTC timestamp, such as 2026-11-21T09:30:00Z";

  function refused(createdAt: string): boolean {
    try {
      parseEvent(withCreatedAt(createdAt));
      return false;
    } catch (error) {
      expect(error).toBeInstanceOf(WebhookError);
      expect((error as WebhookError).message).toBe(MESSAGE);
      return true;
    }
  }

  const pad = (n: number, width = 2) => String(n).padStart(width, "0");
  // Every instant toISOString writes with a four-digit year.
  const instants = fc.date({
    min: new Date("0000-01-01T00:00:00.000Z"),
    max: new Date("9999-12-31T23:59:59.999Z"),
    noInvalidDate: true,
  });

  it("accepts every UTC instant, in every form the spec allows, and keeps the string as sent", () => {
    fc.assert(
      fc.property(
        instants,
        fc.constantFrom("Z", "+00:00"),
        fc.oneof(fc.constant(""), fc.stringMatching(/^\.\d{1,9}$/)),
        (date, zone, fraction) => {
          const createdAt = `${date.toISOString().slice(0, 19)}${fraction}${zone}`;
          expect(parseEvent(withCreatedAt(createdAt)).createdAt).toBe(createdAt);
          // It names the instant it says: the same second, whatever the fraction.
          const parsed = Date.parse(createdAt);
          expect(Math.floor(parsed / 1000)).toBe(Math.floor(date.getTime() / 1000));
          expect(new Date(parsed).toISOString().slice(0, 19)).toBe(createdAt.slice(0, 19));
        },
      ),
    );
  });

  it("round-trips: the toISOString of any instant passes and parses back to that instant", () => {
    fc.assert(
      fc.property(instants, (date) => {
        const { createdAt } = parseEvent(withCreatedAt(date.toISOString()));
        expect(Date.parse(createdAt)).toBe(date.getTime());
      }),
    );
  });

  it("accepts a date-time exactly when the calendar has it: no day 30 February, no second 60", () => {
    // Fields one step past their range on either side, so both answers come up often.
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 9999 }),
        fc.integer({ min: 0, max: 13 }),
        fc.integer({ min: 0, max: 32 }),
        fc.integer({ min: 0, max: 24 }),
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: 0, max: 60 }),
        (year, month, day, hour, minute, second) => {
          const createdAt = `${pad(year, 4)}-${pad(month)}-${pad(day)}T${pad(hour)}:${pad(minute)}:${pad(second)}Z`;
          expect(refused(createdAt)).toBe(!realTimestamp(createdAt));
        },
      ),
    );
  });

  it("accepts exactly the spec's grammar with a real date: any edit of a valid timestamp", () => {
    // The reader goes character by character; the oracle is realTimestamp. Edits draw from the
    // characters the grammar is made of, so near-misses (a missing digit, a second dot, "+00:0",
    // a letter for a digit) come up often.
    const alphabet = fc.constantFrom(..."0123456789-:.TZ+ z\u0660");
    const edit = fc.oneof(
      fc.tuple(fc.constant("replace" as const), fc.nat(), alphabet),
      fc.tuple(fc.constant("insert" as const), fc.nat(), alphabet),
      fc.tuple(fc.constant("delete" as const), fc.nat(), fc.constant("")),
    );
    fc.assert(
      fc.property(
        instants,
        fc.constantFrom("Z", "+00:00", ".5Z", ".123456+00:00", ".Z", "+00:00Z"),
        fc.array(edit, { maxLength: 3 }),
        (date, zone, edits) => {
          let text = `${date.toISOString().slice(0, 19)}${zone}`;
          for (const [kind, position, char] of edits) {
            const at = position % (text.length + 1);
            if (kind === "insert") text = text.slice(0, at) + char + text.slice(at);
            else if (kind === "replace") text = text.slice(0, at) + char + text.slice(at + 1);
            else text = text.slice(0, at) + text.slice(at + 1);
          }
          expect(refused(text)).toBe(!realTimestamp(text));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("refuses every offset but UTC's", () => {
    fc.assert(
      fc.property(
        instants,
        fc.constantFrom("+", "-"),
        fc.integer({ min: 0, max: 99 }),
        fc.integer({ min: 0, max: 99 }),
        (date, sign, hours, minutes) => {
          fc.pre(!(sign === "+" && hours === 0 && minutes === 0));
          expect(refused(`${date.toISOString().slice(0, 19)}${sign}${pad(hours)}:${pad(minutes)}`)).toBe(true);
        },
      ),
    );
  });
});

describe("createdAt against a plain reading of the grammar", () => {
  // The parser reads createdAt from character codes, for speed; realTimestamp is the plain
  // reading of the same grammar, and the two must agree everywhere.
  function accepted(createdAt: string): boolean {
    try {
      parseEvent(JSON.stringify({ id: "evt_1", type: "flag.created", createdAt, environment: "p", data: {} }));
      return true;
    } catch {
      return false;
    }
  }
  const two = (max: number) => fc.integer({ min: 0, max }).map((n) => String(n).padStart(2, "0"));

  it("agrees with the capturing pattern on dates near every boundary", () => {
    const stamp = fc
      .tuple(
        fc.constantFrom("0000", "1900", "2000", "2023", "2024", "2100", "2400", "9999"),
        two(13),
        two(32),
        two(25),
        two(61),
        two(61),
        fc.constantFrom("", ".5", ".123456789", "."),
        fc.constantFrom("Z", "+00:00", "z", "+01:00", ""),
      )
      .map(([y, mo, d, h, mi, s, frac, zone]) => `${y}-${mo}-${d}T${h}:${mi}:${s}${frac}${zone}`);
    fc.assert(
      fc.property(stamp, (text) => accepted(text) === realTimestamp(text)),
      { numRuns: 2000 },
    );
    expect(accepted("2024-02-29T23:59:59.999Z")).toBe(true);
    expect(accepted("2023-02-29T00:00:00Z")).toBe(false);
    expect(accepted("2100-02-29T00:00:00Z")).toBe(false);
    expect(accepted("2000-02-29T00:00:00+00:00")).toBe(true);
  });

  it("agrees with it on arbitrary text over the pattern's alphabet and beyond", () => {
    const chars = fc.constantFrom(..."0123456789-:TZ+.", "٣", "\uff10", "\n", "é");
    fc.assert(
      fc.property(fc.array(chars, { minLength: 18, maxLength: 30 }), (parts) => {
        const text = parts.join("");
        return accepted(text) === realTimestamp(text);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("identifier properties", () => {
  // UTF-8 has no form for a lone surrogate: a string that does not survive encoding and decoding
  // is one Redis (or any UTF-8 store) would turn into another, so it must never become an id.
  const survivesUtf8 = (text: string) => new TextDecoder().decode(new TextEncoder().encode(text)) === text;

  // Code units from the surrogate range, so lone halves, real pairs (a high then a low) and pairs
  // in the wrong order all come up, among ordinary characters.
  const codeUnits = fc.oneof(
    fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit)),
    fc.constantFrom("a", "_", "é", "😀", "\uFFFD"),
  );

  it("accepts an id, type, environment or flag key exactly when it survives UTF-8 unchanged", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("id", "type", "environment", "flag"),
        fc.string({ unit: codeUnits, maxLength: 8 }),
        (field, value) => {
          const body = {
            id: "evt_1",
            type: "flag.updated",
            createdAt: "2026-11-21T09:30:00Z",
            environment: "production",
            data: { flag: "f", changes: [], actor: { type: "user", email: "a@b.c" } },
          };
          if (field === "flag") body.data.flag = value;
          else body[field] = value;
          let accepted = true;
          try {
            parseEvent(JSON.stringify(body));
          } catch (error) {
            expect((error as WebhookError).message).toMatch(/must be well-formed Unicode/);
            accepted = false;
          }
          expect(accepted).toBe(survivesUtf8(value));
        },
      ),
    );
  });
});
