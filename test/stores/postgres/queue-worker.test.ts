import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import express from "express";
import type { WebhookError, WebhookEvent } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { PostgresInbox } from "flag-webhooks/postgres";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import { afterEach, describe, expect, it } from "vitest";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// The Postgres inbox's handle(fn): called by a queue worker (no receiver), or under a receiver
// whose onEvent answered 2xx before running it. Its transaction always ends (committed once, or
// rolled back), its connection goes back to the pool, and fn runs once per event.

const availability = postgresAvailability();
const SECRET = "whsec-attack-postgres";
const database = effectsDatabase(availability.available);
const { pool, effects, openTransactions } = database;
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map((server) => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    }),
  );
});

describe.runIf(availability.available)("PostgresInbox.handle(fn) by a queue worker, no receiver", () => {
  it("the same event handled four times at once: one run, the others duplicates (or 409 while it runs), nothing left open", async () => {
    const inbox = new PostgresInbox(pool(), { scope: "worker-race", lockTimeout: "2s" });
    let runs = 0;
    const handle = inbox.handle(async (event: WebhookEvent, tx) => {
      runs++;
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
      await sleep(100);
    });
    const event = createEvent("flag.updated");
    const results = await Promise.allSettled([handle(event), handle(event), handle(event), handle(event)]);
    const values = results.map((result) =>
      result.status === "fulfilled" ? ((result.value as { status?: number } | undefined)?.status ?? "ran") : "rejected",
    );
    expect(values.filter((value) => value === "ran")).toHaveLength(1);
    expect(values.filter((value) => value === 204)).toHaveLength(3);
    expect([runs, await effects(event.id), await openTransactions()]).toEqual([1, 1, 0]);
  });

  it("COMMIT fails (a deferred foreign key): the call rejects 503, nothing is written, the connection is back; then once", async () => {
    const made = pool(1);
    const inbox = new PostgresInbox(made, { scope: "worker-commit" });
    let withParent = false;
    let runs = 0;
    const handle = inbox.handle(async (event: WebhookEvent, tx) => {
      runs++;
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
      if (withParent) await tx.query("insert into parents (id) values ($1)", [event.id]);
      await tx.query("insert into children (parent_id) values ($1)", [event.id]);
    });
    const event = createEvent("flag.updated");
    const failed = await handle(event).catch((error: unknown) => error);
    expect((failed as WebhookError).code).toBe("store_unavailable");
    expect([await effects(event.id), await openTransactions(), made.idleCount, made.totalCount]).toEqual([0, 0, 1, 1]);
    withParent = true;
    expect(await handle(event)).toBeUndefined();
    expect(await handle(event)).toMatchObject({ status: 204 });
    expect([runs, await effects(event.id)]).toEqual([2, 1]);
  });

  it("fn throws: rejects with its error, rolled back, the connection back; the next call runs it", async () => {
    const made = pool(1);
    const inbox = new PostgresInbox(made, { scope: "worker-throws" });
    let fail = true;
    const handle = inbox.handle(async (event: WebhookEvent, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
      if (fail) throw new Error("worker failed");
    });
    const event = createEvent("flag.updated");
    await expect(handle(event)).rejects.toThrow("worker failed");
    expect([await effects(event.id), made.idleCount, made.totalCount]).toEqual([0, 1, 1]);
    fail = false;
    expect(await handle(event)).toBeUndefined();
    expect(await effects(event.id)).toBe(1);
  });
});

describe.runIf(availability.available)(
  "Express onEvent that answers 200 on res before the Postgres inbox's handler",
  () => {
    it("commits the effect, and the connection goes back to the pool (no transaction left open)", async () => {
      const made = pool(1);
      const inbox = new PostgresInbox(made, { scope: "answer-first" });
      const handle = inbox.handle(async (event: WebhookEvent, tx) => {
        await tx.query("insert into effects (event_id) values ($1)", [event.id]);
      });
      const app = express();
      app.post(
        "/webhooks",
        webhookMiddleware<express.Request, express.Response>({
          secret: SECRET,
          onError: () => {},
          onEvent: async (event, _req, res) => {
            res.status(200).send("ok");
            await sleep(20);
            return handle(event);
          },
        }),
      );
      const server = createServer(app);
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      servers.push(server);
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
      const ids: string[] = [];
      for (let i = 0; i < 2; i++) {
        const event = createEvent("flag.updated");
        ids.push(event.id);
        const d = await signedDelivery({ secret: SECRET, event });
        const response = await fetch(url, { method: "POST", body: d.body, headers: d.headers });
        expect(response.status).toBe(200);
        await sleep(200);
      }
      expect([await effects(ids[0] as string), await effects(ids[1] as string), await openTransactions()]).toEqual([
        1, 1, 0,
      ]);
    });
  },
);
