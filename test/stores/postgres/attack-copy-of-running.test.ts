import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { PostgresInbox } from "flag-webhooks/postgres";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson } from "../../support/deliveries.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Attack on enqueue() beside a row that a transaction holds: the worker's attempt (its row locked
// while the handler runs) or handle()'s open claim. The page promises a copy of a kept event a
// 204 (running included), a copy of an id handle() holds a 409, and group commit that one
// delivery's row costs the others of its COMMIT nothing. The INSERT … ON CONFLICT DO UPDATE that
// keeps them locks the conflicting row even when its WHERE is false, so it waits for that
// transaction to end, with the whole group's COMMIT behind it.

const SECRET = "whsec-attack-copy-of-running";
const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
afterAll(async () => {
  await closeReceivers();
});

const HANDLER_MS = 2500;

describe.skipIf(!availability.available)("enqueue() beside a row a transaction holds (Postgres)", () => {
  // Was broken: with one event's attempt running (its handler 2.5 s), its copy and 16 new
  // deliveries sent at once: 7, 10 and 9 of 17 answered 503 after the 1 s timeout in three runs
  // (the copy and the new ones that shared its COMMIT, which waited for the attempt's row lock; the
  // rest waited behind it). Fixed: on Postgres the keep statement does nothing on a conflict (no
  // row lock), and an expired row is revived apart, by the statement that reads what the id met.
  it("a copy of an event whose attempt is running: 204 at once, and the deliveries of its COMMIT 202", async () => {
    const inbox = new PostgresInbox(database.pool(6), {
      scope: `copy-running-${randomUUID().slice(0, 8)}`,
      timeout: "1s",
      lockTimeout: "500ms",
    });
    const send = await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() });
    const running = `evt_running_${randomUUID()}`;
    expect((await send(eventJson(running))).status).toBe(202);
    let started!: () => void;
    const handlerStarted = new Promise<void>((resolve) => {
      started = resolve;
    });
    const worker = inbox.work(
      async (event) => {
        if (event.id !== running) return;
        started();
        await sleep(HANDLER_MS);
      },
      { interval: false, deadline: "10s" },
    );
    const drained = worker.drain();
    await handlerStarted;
    const fresh = Array.from({ length: 16 }, () => `evt_${randomUUID()}`);
    const replies = await Promise.all([running, ...fresh].map((id) => send(eventJson(id))));
    await drained;
    await worker.close();
    expect(replies.map((reply) => reply.status)).toEqual([204, ...fresh.map(() => 202)]);
  }, 30_000);

  // Was broken the same way: a copy of an id that handle() holds in its open transaction (its
  // handler 2.5 s) is promised 409; it and the new deliveries sent with it waited for that
  // transaction: 17, 16 and 17 of 17 answered 503 after the 1 s timeout in three runs. Fixed: the
  // keep statement's lock waits are bounded (one event's by lockTimeout, then 409; several's by
  // 50 ms, then kept one by one), so the others of its COMMIT are 202.
  it("a copy of an id handle() holds: 409 at once, and the deliveries of its COMMIT 202", async () => {
    const scope = `copy-handled-${randomUUID().slice(0, 8)}`;
    const inbox = new PostgresInbox(database.pool(6), { scope, timeout: "1s", lockTimeout: "500ms" });
    const handled = await adapterReceiver("fetch", {
      secret: SECRET,
      onEvent: inbox.handle(async () => {
        await sleep(HANDLER_MS);
      }),
    });
    const kept = await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() });
    const held = `evt_held_${randomUUID()}`;
    const first = handled(eventJson(held));
    await sleep(300);
    const fresh = Array.from({ length: 16 }, () => `evt_${randomUUID()}`);
    const replies = await Promise.all([held, ...fresh].map((id) => kept(eventJson(id))));
    expect((await first).status).toBe(204);
    expect(replies.map((reply) => reply.status)).toEqual([409, ...fresh.map(() => 202)]);
  }, 30_000);
});
