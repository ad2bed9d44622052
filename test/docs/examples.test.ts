import type { Server } from "node:http";
import { parseEvent } from "flag-webhooks";
import supertest from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp as createExpressApp } from "../../examples/express.js";
import { createHandler, serve } from "../../examples/fetch-node.js";
import { describeEvent } from "../../examples/handle-events.js";
import { createApp as createKoaApp } from "../../examples/koa.js";
import { close, listen } from "../support/http.js";
import { vector } from "../support/vectors.js";

// Every runnable example, exercised the way its README section says to use it, so none can rot.
// The Bun, Deno and Cloudflare Worker examples run in their own runtimes in runtimes.test.ts.
const { secret, body, signature } = vector("flag-updated-compact");
const summary = "dana@example.com changed new-checkout in production (on: false → true)";

describe("examples", () => {
  it("express.ts receives a signed delivery and refuses a tampered one", async () => {
    const app = createExpressApp(secret);
    const ok = await supertest(app).post("/webhooks").set("service-signature", signature).send(body);
    expect(ok.body).toEqual({ received: "evt_01HZX3K9", summary });
    const bad = await supertest(app)
      .post("/webhooks")
      .set("service-signature", signature)
      .send(Buffer.from(`${body} `));
    expect([bad.status, bad.body.error.code]).toEqual([401, "invalid_signature"]);
  });

  it("koa.ts receives a signed delivery and refuses an unsigned one", async () => {
    const server = createKoaApp(secret).callback();
    const ok = await supertest(server).post("/").set("service-signature", signature).send(body);
    expect(ok.body).toEqual({ received: "evt_01HZX3K9", summary });
    const bad = await supertest(server).post("/").send(body);
    expect([bad.status, bad.body.error.code]).toEqual([401, "missing_signature"]);
  });

  describe("fetch-node.ts", () => {
    let server: Server;
    beforeAll(async () => {
      server = await listen(serve(createHandler(secret)));
    });
    afterAll(() => close(server));

    it("serves the fetch handler from a Node server", async () => {
      const ok = await supertest(server).post("/").set("service-signature", signature).send(body);
      expect(ok.body).toEqual({ received: "evt_01HZX3K9", summary });
      const get = await supertest(server).get("/");
      expect([get.status, get.headers.allow]).toEqual([405, "POST"]);
    });
  });

  it("nextjs route.ts exports a POST route handler that verifies", async () => {
    process.env.WEBHOOK_SECRET = secret;
    const { POST } = await import("../../examples/nextjs/app/api/webhooks/route.js");
    delete process.env.WEBHOOK_SECRET;
    const request = (sig: string) =>
      new Request("http://localhost/api/webhooks", {
        method: "POST",
        headers: { "service-signature": sig },
        body: new Uint8Array(body),
      });
    expect((await POST(request(signature))).status).toBe(204);
    expect((await POST(request("0".repeat(64)))).status).toBe(401);
  });

  it.each([
    ["flag.updated", undefined, summary],
    ["flag.created", { flag: "beta" }, "flag.created beta"],
    ["flag.deleted", {}, "flag.deleted (unnamed flag)"],
    ["rollout.step", {}, "rollout.step in production"],
    ["rollout.guard_triggered", {}, "rollout.guard_triggered in production"],
    ["flag.archived", {}, "unhandled event type flag.archived"],
  ])("handle-events.ts describes a %s event", (type, data, expected) => {
    const event = JSON.parse(body.toString());
    event.type = type;
    if (data) event.data = data;
    expect(describeEvent(parseEvent(JSON.stringify(event)))).toBe(expected);
  });
});
