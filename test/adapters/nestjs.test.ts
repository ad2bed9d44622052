import type { AddressInfo } from "node:net";
import type { INestApplication } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import type { NestExpressApplication } from "@nestjs/platform-express";
import { verifyEvent } from "flag-webhooks";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AppModule } from "../../examples/nestjs/app.module.js";
import { createApp } from "../../examples/nestjs/main.js";
import { signatureOf } from "../support/deliveries.js";
import { vector } from "../support/vectors.js";

// examples/nestjs booted as its README section says (Nest 11 on Express, rawBody: true, the
// Express middleware on the webhook route), and sent real signed deliveries over loopback HTTP.
const { secret, body } = vector("flag-updated-compact");
const sign = (bytes: Uint8Array) => signatureOf(secret, bytes);
const summary = "dana@example.com changed new-checkout in production (on: false → true)";
/** The compact event padded with JSON whitespace to 200 KiB: over body-parser's 100 KiB default. */
const large = Buffer.concat([body, Buffer.alloc(200 * 1024 - body.length, " ")]);

const apps: INestApplication[] = [];
async function serve(app: INestApplication): Promise<string> {
  apps.push(app);
  await app.listen(0, "127.0.0.1");
  const { port } = app.getHttpServer().address() as AddressInfo;
  return `http://127.0.0.1:${port}`;
}

async function post(base: string, payload: Uint8Array, headers: Record<string, string> = {}) {
  return fetch(`${base}/webhooks`, {
    method: "POST",
    headers: { "content-type": "application/json", "service-signature": await sign(payload), ...headers },
    body: new Uint8Array(payload),
  });
}

beforeAll(() => {
  // AppModule reads the secret when Nest configures its middleware, as a deployed app would.
  process.env.WEBHOOK_SECRET = secret;
});
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});
afterAll(() => {
  delete process.env.WEBHOOK_SECRET;
});

describe("examples/nestjs", () => {
  it("hands the controller the typed event of a signed delivery", async () => {
    const base = await serve(await createApp());
    const res = await post(base, body);
    expect([res.status, await res.json()]).toEqual([200, { received: "evt_01HZX3K9", summary }]);
  });

  it("refuses a forged delivery with 401 in the service's error shape, before the controller", async () => {
    const base = await serve(await createApp());
    const res = await post(base, body, { "service-signature": "0".repeat(64) });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: { code: "invalid_signature", message: expect.stringMatching(/not the HMAC-SHA256 of the body/) },
    });
  });

  it("verifies bodies Nest's JSON parser skips (text/plain, no content type) from the stream", async () => {
    const base = await serve(await createApp());
    for (const type of ["text/plain", "application/octet-stream"]) {
      const res = await post(base, body, { "content-type": type });
      expect([type, res.status]).toEqual([type, 200]);
    }
  });

  it("answers 405 with Allow: POST to a GET on the webhook path", async () => {
    const base = await serve(await createApp());
    const res = await fetch(`${base}/webhooks`);
    expect([res.status, res.headers.get("allow"), (await res.json()).error.code]).toEqual([
      405,
      "POST",
      "method_not_allowed",
    ]);
  });

  it("accepts a 200 KiB signed delivery once body-parser's limit is raised with useBodyParser", async () => {
    const base = await serve(await createApp());
    const res = await post(base, large);
    expect([res.status, (await res.json()).received]).toEqual([200, "evt_01HZX3K9"]);
  });

  it("shows why: with body-parser's 100 KiB default, the same delivery never reaches flag-webhooks", async () => {
    const app = await NestFactory.create<NestExpressApplication>(AppModule, { rawBody: true, logger: false });
    const base = await serve(app);
    const res = await post(base, large);
    // Nest's own 413 from body-parser, not flag-webhooks' { error: { code, message } }.
    expect([res.status, await res.json()]).toEqual([413, { statusCode: 413, message: "request entity too large" }]);
  });

  it("without rawBody: true, answers 500 body_already_parsed naming the fix, not a 401 or a hang", async () => {
    const base = await serve(await createApp({ rawBody: false }));
    const res = await post(base, body);
    const { error } = await res.json();
    expect([res.status, error.code]).toEqual([500, "body_already_parsed"]);
    expect(error.message).toContain("NestFactory.create(AppModule, { rawBody: true })");
  });

  it("a guard built on verifyEvent gets a TypeError naming rawBody: true when req.rawBody is undefined", async () => {
    const rawBody: Uint8Array | undefined = undefined; // what req.rawBody is without rawBody: true
    const thrown = verifyEvent({ secret, payload: rawBody as never, signature: await sign(body) });
    await expect(thrown).rejects.toBeInstanceOf(TypeError);
    await expect(thrown).rejects.toThrow(/NestFactory\.create\(AppModule, \{ rawBody: true \}\)/);
  });
});
