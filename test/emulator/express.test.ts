import { spawn } from "node:child_process";
import type { Server } from "node:http";
import { resolve } from "node:path";
import express from "express";
import type { FlagChange, WebhookEvent } from "flag-webhooks";
import { createEmulator, type Emulator } from "flag-webhooks/emulator";
import { webhookMiddleware } from "flag-webhooks/express";
import { describe, expect, expectTypeOf, it } from "vitest";
import { createApp } from "../../examples/express.js";
import { cleanupAfterEach } from "../support/cleanup.js";
import { call, until } from "../support/emulator.js";
import { close, listen } from "../support/http.js";

// End to end: the emulator sends real signed deliveries to a real Express app using our
// middleware, over real HTTP, as a developer's laptop would with `flag-webhooks dev --forward`.

const cleanup = cleanupAfterEach();

async function start(app: express.Express): Promise<string> {
  const server: Server = await listen(app.listen(0, "127.0.0.1"));
  cleanup(() => close(server));
  const { port } = server.address() as { port: number };
  return `http://127.0.0.1:${port}/webhooks`;
}

async function emulatorWithWebhook(url: string, options = {}) {
  const emulator: Emulator = await createEmulator({ retry: { initialDelayMs: 10 }, ...options });
  cleanup(() => emulator.close());
  const { json } = await call(emulator, "POST", "/projects/shop/webhooks", {
    body: { url, events: ["flag.updated"], environments: ["production"] },
  });
  await call(emulator, "POST", "/projects/shop/flags", { body: { key: "new-checkout", type: "boolean" } });
  return { emulator, secret: json.secret as string, id: json.id as string };
}

/** An app with our middleware that can be told to fail, recording each event its handler saw. */
function appWith(secret: () => string, failFirst = 0) {
  const handled: WebhookEvent[] = [];
  let requests = 0;
  const app = express();
  app.post(
    "/webhooks",
    (_req, res, next) => {
      // The app is down for its first requests: they fail before the handler runs.
      if (++requests <= failFirst) res.status(500).send("down for maintenance");
      else next();
    },
    (req, res, next) => webhookMiddleware({ secret: secret() })(req, res, next),
    (req, res) => {
      if (req.webhookEvent) handled.push(req.webhookEvent);
      res.sendStatus(204);
    },
  );
  return { app, handled, requests: () => requests };
}

describe("emulator → Express app with webhookMiddleware", () => {
  it("a PATCH that turns a flag on reaches examples/express.ts as a typed flag.updated", async () => {
    let secret = "";
    const url = await start(express().use((req, res, next) => createApp(secret)(req, res, next)));
    const { emulator, secret: created } = await emulatorWithWebhook(url, {
      actor: { type: "user", email: "dana@example.com" },
    });
    secret = created;
    const patched = await call(emulator, "PATCH", "/projects/shop/flags/new-checkout", {
      body: { environment: "production", on: true },
    });
    expect(patched.status).toBe(200);
    await emulator.settled();
    const [delivery] = emulator.deliveries();
    expect(delivery?.state).toBe("succeeded");
    expect(JSON.parse(delivery?.attempts[0]?.responseBody ?? "")).toEqual({
      received: JSON.parse(delivery?.request.body ?? "").id,
      summary: "dana@example.com changed new-checkout in production (on: false → true)",
    });
  });

  it("hands the handler a flag.updated whose changes and actor are typed and right", async () => {
    let secret = "";
    const { app, handled } = appWith(() => secret);
    const { emulator, secret: created } = await emulatorWithWebhook(await start(app));
    secret = created;
    await call(emulator, "PATCH", "/projects/shop/flags/new-checkout", {
      body: { environment: "production", on: true, rollout: { percent: 10 } },
    });
    await emulator.settled();
    expect(handled.length).toBe(1);
    const event = handled[0] as WebhookEvent;
    if (event.type !== "flag.updated") throw new Error(`got ${event.type}`);
    expectTypeOf(event.data.changes).toEqualTypeOf<FlagChange[]>();
    expect(event.environment).toBe("production");
    expect(event.data).toEqual({
      flag: "new-checkout",
      changes: [
        { path: "on", from: false, to: true },
        { path: "rollout.percent", from: null, to: 10 },
      ],
      actor: { type: "user", email: "developer@example.com" },
    });
  });

  it("an app answering 500 twice then 2xx gets exactly three attempts, and the handler runs once", async () => {
    let secret = "";
    const { app, handled, requests } = appWith(() => secret, 2);
    const { emulator, secret: created } = await emulatorWithWebhook(await start(app));
    secret = created;
    await call(emulator, "PATCH", "/projects/shop/flags/new-checkout", {
      body: { environment: "production", on: true },
    });
    await emulator.settled();
    expect(requests()).toBe(3);
    expect(emulator.deliveries().map((d) => d.attempts.map((a) => a.status))).toEqual([[500, 500, 204]]);
    expect(handled.map((e) => e.type)).toEqual(["flag.updated"]);
  });

  it("the app refuses a tampered copy with 401, and its handler never sees it", async () => {
    let secret = "";
    const { app, handled } = appWith(() => secret);
    const { emulator, secret: created } = await emulatorWithWebhook(await start(app));
    secret = created;
    await call(emulator, "PATCH", "/projects/shop/flags/new-checkout", {
      body: { environment: "production", on: true },
    });
    await emulator.settled();
    const [original] = emulator.deliveries();
    await call(emulator, "POST", `/_emulator/deliveries/${original?.id}/tampered-copy`);
    await emulator.settled();
    const tampered = emulator.deliveries().find((d) => d.kind === "tampered");
    expect(tampered?.attempts.map((a) => [a.status, JSON.parse(a.responseBody ?? "").error.code])).toEqual([
      [401, "invalid_signature"],
    ]);
    expect(handled.length).toBe(1);
  });

  it("a deleted webhook gets nothing more", async () => {
    let secret = "";
    const { app, handled, requests } = appWith(() => secret);
    const { emulator, secret: created, id } = await emulatorWithWebhook(await start(app));
    secret = created;
    await call(emulator, "PATCH", "/projects/shop/flags/new-checkout", {
      body: { environment: "production", on: true },
    });
    await emulator.settled();
    expect(requests()).toBe(1);
    expect((await call(emulator, "DELETE", `/projects/shop/webhooks/${id}`)).status).toBe(204);
    await call(emulator, "PATCH", "/projects/shop/flags/new-checkout", {
      body: { environment: "production", on: false },
    });
    await call(emulator, "DELETE", "/projects/shop/flags/new-checkout");
    await emulator.settled();
    await new Promise((r) => setTimeout(r, 100));
    expect([requests(), handled.length]).toEqual([1, 1]);
  });
});

describe("flag-webhooks dev", () => {
  it("prints the URL, token and --forward secret, delivers to the app, and stops on SIGINT", async () => {
    let secret = "";
    const { app, handled } = appWith(() => secret);
    const forward = await start(app);
    const root = resolve(import.meta.dirname, "../..");
    const child = spawn(process.execPath, ["dist/cli.js", "dev", "--port", "0", "--forward", forward], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk;
    });
    child.stderr.on("data", (chunk: Buffer) => {
      err += chunk;
    });
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
    cleanup(async () => {
      if (child.exitCode === null) child.kill("SIGKILL");
    });

    await until(() => out.includes("Ctrl+C"), 20_000).catch(() => {
      throw new Error(`dev did not start: ${out}${err}`);
    });
    const url = /API +(http:\/\/127\.0\.0\.1:\d+\/v2)\n/.exec(out)?.[1];
    const token = /token +(\S+)\n/.exec(out)?.[1];
    secret = /secret +(whsec_[0-9a-f]+)\n/.exec(out)?.[1] ?? "";
    expect([url, token, secret].every(Boolean)).toBe(true);
    expect(out.split(secret).length).toBe(2); // the secret is printed once

    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    await fetch(`${url}/projects/default/flags`, {
      method: "POST",
      headers,
      body: JSON.stringify({ key: "dark-mode", type: "boolean" }),
    });
    await fetch(`${url}/projects/default/flags/dark-mode`, {
      method: "PATCH",
      headers,
      body: JSON.stringify({ environment: "staging", on: true }),
    });
    await until(() => handled.some((e) => e.type === "flag.updated"), 10_000);
    const updated = handled.find((e) => e.type === "flag.updated");
    expect(updated?.type === "flag.updated" && updated.data.changes).toEqual([{ path: "on", from: false, to: true }]);
    await until(() => /flag\.updated staging → .* 204 in/.test(out), 5000);

    child.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(out).toContain("stopped");
  });

  it("refuses a bad --port and --forward with a one-line error and exit 2", async () => {
    const root = resolve(import.meta.dirname, "../..");
    const run = (args: string[]) =>
      new Promise<{ code: number | null; err: string }>((done) => {
        const child = spawn(process.execPath, ["dist/cli.js", "dev", ...args], { cwd: root });
        let err = "";
        child.stderr.on("data", (chunk: Buffer) => {
          err += chunk;
        });
        child.on("exit", (code) => done({ code, err }));
      });
    const port = await run(["--port", "http"]);
    expect([port.code, port.err.split("\n")[0]]).toEqual([
      2,
      'flag-webhooks: --port must be a port number, not "http"',
    ]);
    const forward = await run(["--port", "0", "--forward", "localhost:3000"]);
    expect(forward.code).toBe(2);
    expect(forward.err).toMatch(/^flag-webhooks: --forward must be/);
  });
});
