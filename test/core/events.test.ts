import { MemoryDedupeStore, parseEvent, SIGNATURE_HEADER, sign, WebhookError } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { describe, expect, it } from "vitest";
import { sampleEvent, sampleJson, vector } from "../support/vectors.js";

const compact = vector("flag-updated-compact");
const base = sampleEvent();
const event = sampleJson;

function invalidPayload(payload: string | Uint8Array): WebhookError {
  try {
    parseEvent(payload);
  } catch (error) {
    expect(error).toBeInstanceOf(WebhookError);
    expect((error as WebhookError).code).toBe("invalid_payload");
    expect((error as WebhookError).status).toBe(400);
    return error as WebhookError;
  }
  throw new Error("parseEvent accepted an invalid payload");
}

describe("parseEvent", () => {
  it("parses the sample flag.updated delivery into a typed event", () => {
    const parsed = parseEvent(compact.body);
    expect(parsed).toEqual(base);
    if (parsed.type !== "flag.updated") throw new Error("wrong type");
    expect(parsed.data.changes[0]).toEqual({ path: "on", from: false, to: true });
    expect(parsed.data.actor.email).toBe("dana@example.com");
  });

  it("parses pretty-printed JSON and strings as well as bytes", () => {
    expect(parseEvent(vector("flag-updated-pretty").body)).toEqual(base);
    expect(parseEvent(compact.body.toString())).toEqual(base);
  });

  it("keeps fields it does not know, at every level", () => {
    const parsed = parseEvent(
      event((e) => {
        e.extra = 1;
        e.data.reason = "audit";
        e.data.changes[0].meta = { a: true };
      }),
    ) as unknown as Record<string, any>;
    expect(parsed.extra).toBe(1);
    expect(parsed.data.reason).toBe("audit");
    expect(parsed.data.changes[0].meta).toEqual({ a: true });
  });

  it.each(["flag.created", "flag.deleted", "rollout.step", "rollout.guard_triggered"])(
    "accepts %s with whatever object data the service sends",
    (type) => {
      const parsed = parseEvent(
        event((e) => {
          e.type = type;
          e.data = { flag: "x", anything: [1, 2] };
        }),
      );
      expect(parsed.type).toBe(type);
      expect(parsed.data).toEqual({ flag: "x", anything: [1, 2] });
    },
  );

  it("delivers an event of a type it does not know as type 'unknown', keeping the original type", () => {
    const parsed = parseEvent(
      event((e) => {
        e.type = "flag.archived";
        e.data = "anything at all";
      }),
    );
    expect(parsed.type).toBe("unknown");
    if (parsed.type !== "unknown") throw new Error("narrowing");
    expect(parsed.originalType).toBe("flag.archived");
    expect(parsed.data).toBe("anything at all");
    expect(parsed.id).toBe(base.id);
  });

  it.each([
    ["the body is not JSON", "not json", "body is not valid JSON"],
    ["the body is empty", "", "body is not valid JSON"],
    ["the body is a JSON array", "[]", "body must be an object"],
    ["the body is JSON null", "null", "body must be an object"],
    ["id is missing", event((e) => delete e.id), "id must be a string"],
    ["id is a number", event((e) => (e.id = 1)), "id must be a string"],
    ["type is missing", event((e) => delete e.type), "type must be a string"],
    ["environment is null", event((e) => (e.environment = null)), "environment must be a string"],
    ["createdAt is missing", event((e) => delete e.createdAt), "createdAt must be a string"],
    ["createdAt is not a timestamp", event((e) => (e.createdAt = "yesterday")), "createdAt must be an ISO 8601 UTC"],
    ["createdAt has no zone", event((e) => (e.createdAt = "2026-11-21T09:30:00")), "createdAt must be an ISO 8601 UTC"],
    ["data is missing", event((e) => delete e.data), "data is missing"],
    ["data is an array", event((e) => (e.data = [])), "data must be an object"],
    ["data.flag is missing", event((e) => delete e.data.flag), "data.flag must be a string"],
    ["data.changes is an object", event((e) => (e.data.changes = {})), "data.changes must be an array"],
    ["a change is not an object", event((e) => e.data.changes.push(null)), "data.changes[1] must be an object"],
    [
      "the third change has no path",
      event((e) => e.data.changes.push({ path: "a", from: 1, to: 2 }, { from: 1, to: 2 })),
      "data.changes[2].path must be a string",
    ],
    ["data.actor is missing", event((e) => delete e.data.actor), "data.actor must be an object"],
    ["data.actor.type is missing", event((e) => delete e.data.actor.type), "data.actor.type must be a string"],
    ["data.actor.email is a number", event((e) => (e.data.actor.email = 5)), "data.actor.email must be a string"],
    [
      "flag.created data is a string",
      event((e) => {
        e.type = "flag.created";
        e.data = "x";
      }),
      "data must be an object",
    ],
  ])("refuses a body where %s, naming the field", (_, payload, message) => {
    expect(invalidPayload(payload).message).toContain(message);
  });

  it.each([
    "2026-11-21T09:30:00Z",
    "2026-11-21T09:30:00.123Z",
    "2026-11-21T09:30:00.123456789Z",
    "2026-11-21T09:30:00+00:00",
    "2024-02-29T23:59:59.999Z",
    "2000-02-29T00:00:00Z",
    "2026-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999Z",
  ])("accepts createdAt %s, an ISO 8601 UTC instant, unchanged", (createdAt) => {
    expect(parseEvent(event((e) => (e.createdAt = createdAt))).createdAt).toBe(createdAt);
  });

  it.each([
    ["month 13", "2026-13-01T09:30:00Z"],
    ["month 00", "2026-00-10T09:30:00Z"],
    ["day 40", "2026-11-40T09:30:00Z"],
    ["day 00", "2026-11-00T09:30:00Z"],
    ["30 February (Date.parse reads it as 2 March)", "2026-02-30T09:30:00Z"],
    ["29 February of a common year", "2026-02-29T09:30:00Z"],
    ["29 February 2100 (not a leap year)", "2100-02-29T09:30:00Z"],
    ["31 April", "2026-04-31T09:30:00Z"],
    ["hour 24", "2026-11-21T24:00:00Z"],
    ["minute 60", "2026-11-21T09:60:00Z"],
    ["second 60 (a leap second)", "2026-12-31T23:59:60Z"],
    ["the offset +99:99", "2026-11-21T09:30:00+99:99"],
    ["an offset that is not UTC", "2026-11-21T09:30:00+02:00"],
    ["a negative offset", "2026-11-21T09:30:00.5-05:30"],
    ["-00:00 (RFC 3339's unknown offset)", "2026-11-21T09:30:00-00:00"],
    ["a lowercase z", "2026-11-21T09:30:00z"],
    ["no seconds", "2026-11-21T09:30Z"],
    ["a comma fraction", "2026-11-21T09:30:00,5Z"],
    ["the basic format", "20261121T093000Z"],
    ["a leading x", "x2026-11-21T09:30:00Z"],
    ["a trailing x", "2026-11-21T09:30:00Zx"],
    ["an empty fraction", "2026-11-21T09:30:00.Z"],
    ["a letter in the fraction", "2026-11-21T09:30:00.aZ"],
    ["a space for T", "2026-11-21 09:30:00Z"],
    ["a trailing newline", "2026-11-21T09:30:00Z\n"],
  ])("refuses createdAt with %s: %s", (_, createdAt) => {
    expect(invalidPayload(event((e) => (e.createdAt = createdAt))).message).toBe(
      "createdAt must be an ISO 8601 UTC timestamp, such as 2026-11-21T09:30:00Z",
    );
  });

  it.each([
    ["id", (e: Record<string, any>, v: string) => (e.id = v), "id"],
    ["type", (e: Record<string, any>, v: string) => (e.type = v), "type"],
    ["environment", (e: Record<string, any>, v: string) => (e.environment = v), "environment"],
    ["data.flag", (e: Record<string, any>, v: string) => (e.data.flag = v), "data.flag"],
  ])("refuses a %s field that is not well-formed Unicode (a lone surrogate)", (_, set, field) => {
    for (const bad of ["evt_\ud800", "evt_\udbff", "\udc00evt", "evt_\ude00\ud83d"]) {
      expect(invalidPayload(event((e) => set(e, bad))).message).toBe(
        `${field} must be well-formed Unicode (it holds a lone surrogate)`,
      );
    }
    // A surrogate pair is a real character (U+1F600), escaped in JSON or not.
    expect(() => parseEvent(event((e) => set(e, "evt_\ud83d\ude00")))).not.toThrow();
    expect(() => parseEvent(event((e) => set(e, "evt_😀")).replace("😀", "\\ud83d\\ude00"))).not.toThrow();
  });

  it("refuses an id with a lone surrogate written as a JSON escape, as bytes and as a string", () => {
    // UTF-8 cannot carry a lone surrogate, but JSON's \uXXXX escape can.
    const escaped = event((e) => (e.id = "evt_X")).replace("evt_X", "evt_\\ud800");
    expect(escaped).toContain('"evt_\\ud800"');
    expect(invalidPayload(escaped).message).toContain("id must be well-formed Unicode");
    expect(invalidPayload(Buffer.from(escaped)).message).toContain("id must be well-formed Unicode");
  });

  it("ignores one leading byte order mark, in bytes and in a string alike", () => {
    const text = compact.body.toString("utf8");
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), compact.body]);
    expect(bytes.toString("utf8").charCodeAt(0)).toBe(0xfeff);
    expect(parseEvent(bytes)).toEqual(base);
    expect(parseEvent(bytes.toString("utf8"))).toEqual(base);
    expect(parseEvent(`\uFEFF${text}`)).toEqual(base);
    // Only one, the way TextDecoder drops only one: a second mark is not JSON in either form.
    const twice = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf]), compact.body]);
    expect(invalidPayload(twice).message).toBe("body is not valid JSON");
    expect(invalidPayload(twice.toString("utf8")).message).toBe("body is not valid JSON");
    // A mark anywhere else is not a byte order mark.
    expect(invalidPayload(` \uFEFF${text}`).message).toBe("body is not valid JSON");
  });

  it("says exactly which field is wrong, and keeps the parser's error as the cause", () => {
    expect(invalidPayload(event((e) => delete e.id)).message).toBe("id must be a string");
    expect(invalidPayload(event((e) => (e.data.actor.email = 1))).message).toBe("data.actor.email must be a string");
    const notJson = invalidPayload("{");
    expect(notJson.message).toBe("body is not valid JSON");
    expect(notJson.cause).toBeInstanceOf(SyntaxError);
    expect(invalidPayload(vector("invalid-utf8-bytes").body).cause).toBeInstanceOf(TypeError);
  });

  it("names a top-level field that is not a string without any prefix", () => {
    expect(invalidPayload(event((e) => (e.createdAt = 5))).message).toBe("createdAt must be a string");
  });

  it("accepts a body that really contains U+FFFD, as bytes", () => {
    const withReplacement = Buffer.from(
      event((e) => (e.data.flag = "bad-\uFFFD-name")),
      "utf8",
    );
    const parsed = parseEvent(withReplacement);
    expect(parsed.type === "flag.updated" && parsed.data.flag).toBe("bad-\uFFFD-name");
  });

  it("refuses bytes that are not UTF-8", () => {
    expect(invalidPayload(vector("invalid-utf8-bytes").body).message).toContain("not valid UTF-8");
  });

  it("does not let __proto__ in a body change any prototype", () => {
    const parsed = parseEvent(event((e) => (e.data.__proto__x = 1)).replace("__proto__x", "__proto__")) as unknown as {
      data: Record<string, unknown>;
    };
    expect(Object.getPrototypeOf(parsed.data)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).flag).toBeUndefined();
  });
});

describe("through an adapter (fetch, with dedupe)", () => {
  const { secret, body } = compact;

  async function deliver(handler: (request: Request) => Promise<Response>, payload: Uint8Array) {
    const headers = { [SIGNATURE_HEADER]: await sign({ secret, payload }) };
    const request = new Request("https://example.test/webhooks", {
      method: "POST",
      headers,
      body: new Uint8Array(payload),
    });
    const response = await handler(request);
    return [response.status, response.status === 204 ? null : (await response.json()).error.code];
  }

  it("answers 400 to ids that would collide as keys, and runs nothing", async () => {
    const seen: string[] = [];
    const handler = webhookHandler({
      secret,
      dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
      onEvent: (event) => void seen.push(event.id),
    });
    for (const id of ["evt_\ud800", "evt_\udbff"]) {
      const payload = Buffer.from(event((e) => (e.id = id)));
      expect(await deliver(handler, payload)).toEqual([400, "invalid_payload"]);
    }
    // An id outside the Basic Multilingual Plane is well-formed, and runs once.
    const astral = Buffer.from(event((e) => (e.id = "evt_😀")));
    expect(await deliver(handler, astral)).toEqual([204, null]);
    expect(seen).toEqual(["evt_😀"]);
  });

  it("runs a body that starts with a byte order mark", async () => {
    const seen: string[] = [];
    const handler = webhookHandler({ secret, onEvent: (event) => void seen.push(event.id) });
    expect(await deliver(handler, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]))).toEqual([204, null]);
    expect(seen).toEqual([base.id]);
  });
});
