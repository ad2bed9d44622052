import { SIGNATURE_HEADER, sign, toErrorBody, verifyEvent, WebhookError } from "flag-webhooks";
import { describe, expect, it } from "vitest";
import { sampleEvent, sampleJson, vector } from "../support/vectors.js";

// verifyEvent, the core's one call: the signature first (over the raw bytes, before anything is
// parsed), then the event. Its replay window (maxAge) is in test/delivery/replay-window.test.ts.

const compact = vector("flag-updated-compact");
const base = sampleEvent();
const event = sampleJson;

describe("verifyEvent", () => {
  const { secret, body, signature } = compact;

  async function refusal(options: Parameters<typeof verifyEvent>[0]): Promise<WebhookError> {
    const error = await verifyEvent(options).then(
      () => {
        throw new Error("verifyEvent accepted the delivery");
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(WebhookError);
    return error as WebhookError;
  }

  it("returns the typed event of an authentic delivery, under a rotation list too", async () => {
    expect(await verifyEvent({ secret, payload: body, signature })).toEqual(base);
    expect(await verifyEvent({ secret: ["new-secret", secret], payload: body, signature })).toEqual(base);
  });

  it.each([undefined, null, "", []])("answers missing_signature (401) for a header that is %j", async (missing) => {
    const error = await refusal({ secret, payload: body, signature: missing });
    expect([error.code, error.status]).toEqual(["missing_signature", 401]);
    expect(error.message).toContain(SIGNATURE_HEADER);
  });

  it("answers invalid_signature (401) for a wrong or repeated header, saying why and naming the header", async () => {
    for (const bad of ["0".repeat(64), `sha256=${signature}`, [signature, signature]]) {
      const error = await refusal({ secret, payload: body, signature: bad });
      expect([error.code, error.status]).toEqual(["invalid_signature", 401]);
      expect(error.message).toBe(`${SIGNATURE_HEADER} header is not the HMAC-SHA256 of the body`);
    }
  });

  it("never parses an unauthenticated body: a forged non-JSON body is invalid_signature", async () => {
    const error = await refusal({ secret, payload: "}{ not json", signature });
    expect(error.code).toBe("invalid_signature");
  });

  it("answers invalid_payload (400) for an authentic body that is not an event", async () => {
    const payload = '{"hello":"world"}';
    const error = await refusal({ secret, payload, signature: await sign({ secret, payload }) });
    expect([error.code, error.status]).toEqual(["invalid_payload", 400]);
  });

  it("refuses an authentic event whose id, type or environment holds a lone surrogate (400)", async () => {
    for (const edit of [
      (e: Record<string, any>) => (e.id = "evt_\ud800"),
      (e: Record<string, any>) => (e.type = "flag.\udbff"),
      (e: Record<string, any>) => (e.environment = "prod\udc00"),
    ]) {
      const payload = event(edit);
      const error = await refusal({ secret, payload, signature: await sign({ secret, payload }) });
      expect([error.code, error.status]).toEqual(["invalid_payload", 400]);
      expect(error.message).toContain("must be well-formed Unicode");
    }
  });

  it("gives a body with a byte order mark one answer, as bytes or as a string: the event", async () => {
    const payload = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]);
    const signed = await sign({ secret, payload });
    expect(await verifyEvent({ secret, payload, signature: signed })).toEqual(base);
    // Buffer#toString keeps the mark, so the string's UTF-8 bytes are the signed bytes.
    expect(await verifyEvent({ secret, payload: payload.toString("utf8"), signature: signed })).toEqual(base);
    // The signature covers the mark: the body without it is another body, which is what fetch's
    // request.text() hands over (docs/core.md says to pass request.arrayBuffer() instead).
    expect((await refusal({ secret, payload: body, signature: signed })).code).toBe("invalid_signature");
    const request = () => new Request("https://example.test/", { method: "POST", body: new Uint8Array(payload) });
    const text = await request().text();
    expect(text.charCodeAt(0)).not.toBe(0xfeff);
    expect((await refusal({ secret, payload: text, signature: signed })).code).toBe("invalid_signature");
    const bytes = await request().arrayBuffer();
    expect(await verifyEvent({ secret, payload: bytes, signature: signed })).toEqual(base);
  });

  it("refuses 30 February with maxAge instead of reading it as 2 March", async () => {
    const payload = event((e) => (e.createdAt = "2026-02-30T10:00:00Z"));
    const error = await refusal({
      secret,
      payload,
      signature: await sign({ secret, payload }),
      maxAge: "1h",
      now: () => Date.parse("2026-03-02T10:00:00Z"),
    });
    expect([error.code, error.status]).toEqual(["invalid_payload", 400]);
    expect(error.message).toContain("createdAt must be an ISO 8601 UTC timestamp");
  });

  it("never puts the secret or the expected digest in an error", async () => {
    const error = await refusal({ secret, payload: body, signature: "f".repeat(64) });
    const rendered = JSON.stringify(toErrorBody(error)) + error.message + String(error.stack);
    expect(rendered).not.toContain(secret);
    expect(rendered).not.toContain(signature);
  });

  it("renders an error in the service's error shape", async () => {
    const error = await refusal({ secret, payload: body, signature: undefined });
    expect(toErrorBody(error)).toEqual({ error: { code: "missing_signature", message: error.message } });
  });
});
