import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type express from "express";
import Fastify, { type FastifyReply } from "fastify";
import { createRouter, type WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { webhookHandler as lambdaHandler } from "flag-webhooks/lambda";
import { PostgresInbox } from "flag-webhooks/postgres";
import { createEvent, signedDelivery, signedRequest } from "flag-webhooks/testing";
import Koa from "koa";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { expressServer } from "../../support/express.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// The inbox's writes commit exactly when the receiver answers 2xx, and before that 2xx leaves:
// the handler finishing is not enough, nor is a 2xx written through the framework, nor the value
// the handler returned. Each case runs through the adapter it concerns, against a real PostgreSQL,
// and counts the handler's effect rows afterwards.

const availability = postgresAvailability();
const SECRET = "whsec-commit-before-answer";

const database = effectsDatabase(availability.available);
const { pool, effects, openTransactions } = database;
const servers: { close(): unknown }[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** A signed copy of one event: every call signs the same event, as a sender's retries do. */
function copies(event = createEvent("flag.updated")) {
  return { event, send: () => signedDelivery({ secret: SECRET, event }) };
}

async function serve(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push({ close: () => new Promise((resolve) => server.close(resolve)) });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
}

/**
 * An Express receiver, serving until the test ends, whose onEvent is `inbox.handle()` around a
 * handler that writes the event's effect row through tx, then does `then` (its result is the
 * handler's); its URL.
 */
function effectReceiver(
  inbox: PostgresInbox<pg.Pool>,
  then: (event: WebhookEvent, tx: pg.PoolClient, res: express.Response) => unknown,
  options: { onError?: (error: unknown) => void } = {},
): Promise<string> {
  return serve(
    expressServer({
      secret: SECRET,
      ...options,
      onEvent: inbox.handle(async (event, tx: pg.PoolClient, _req, res: express.Response) => {
        await tx.query("insert into effects (event_id) values ($1)", [event.id]);
        return then(event, tx, res);
      }),
    }),
  );
}

async function post(url: string, delivery: { body: string; headers: Record<string, string> }) {
  // A receiver that never answers fails the test, rather than hang it.
  const response = await fetch(url, {
    method: "POST",
    body: delivery.body,
    headers: delivery.headers,
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, retryAfter: response.headers.get("retry-after"), body: await response.text() };
}

describe.skipIf(!availability.available)("PostgresInbox: a 2xx leaves only after COMMIT", () => {
  it("Express, an answer written on res and then a throw: 500, nothing committed; the retry runs and commits once", async () => {
    let runs = 0;
    const url = await effectReceiver(
      new PostgresInbox(pool(), { scope: "express-throw" }),
      (_event, _tx, res) => {
        runs++;
        res.json({ ok: true });
        if (runs === 1) throw new Error("failed after answering");
      },
      { onError: () => {} },
    );
    const { event, send } = copies();
    expect((await post(url, await send())).status).toBe(500);
    expect(await effects(event.id)).toBe(0);
    expect(await post(url, await send())).toMatchObject({ status: 200, body: '{"ok":true}' });
    expect(await effects(event.id)).toBe(1);
    expect((await post(url, await send())).status).toBe(204);
    expect(runs).toBe(2);
  });

  it("Express, a COMMIT that fails (a deferred foreign key) after res.sendStatus(200): 503 with Retry-After, nothing committed", async () => {
    const url = await effectReceiver(
      new PostgresInbox(pool(), { scope: "express-deferred" }),
      async (event, tx, res) => {
        // Checked only at COMMIT: there is no such parent.
        await tx.query("insert into children (parent_id) values ($1)", [event.id]);
        res.sendStatus(200);
      },
      { onError: () => {} },
    );
    const { event, send } = copies();
    expect(await post(url, await send())).toMatchObject({ status: 503, retryAfter: "10" });
    expect(await effects(event.id)).toBe(0);
    expect(await openTransactions()).toBe(0);
  });

  it("Fastify, reply.send() and then a throw: 500, nothing committed", async () => {
    const inbox = new PostgresInbox(pool(), { scope: "fastify-throw" });
    const app = Fastify();
    await app.register(webhookPlugin, {
      path: "/webhooks",
      secret: SECRET,
      onError: () => {},
      onEvent: inbox.handle(async (event, tx, _request, reply: FastifyReply) => {
        await tx.query("insert into effects (event_id) values ($1)", [event.id]);
        reply.code(200).send({ ok: true });
        throw new Error("failed after answering");
      }),
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    servers.push({ close: () => app.close() });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/webhooks`;
    const { event, send } = copies();
    expect((await post(url, await send())).status).toBe(500);
    expect(await effects(event.id)).toBe(0);
  });

  it("Koa, ctx.status = 503 after the writes: 503, rolled back, and the retry runs the handler again", async () => {
    const inbox = new PostgresInbox(pool(), { scope: "koa-503" });
    let runs = 0;
    const app = new Koa();
    app.use(
      koaMiddleware({
        secret: SECRET,
        onEvent: inbox.handle(async (event, tx, ctx: Koa.Context) => {
          runs++;
          await tx.query("insert into effects (event_id) values ($1)", [event.id]);
          ctx.status = runs === 1 ? 503 : 204;
        }),
      }),
    );
    const url = await serve(createServer(app.callback()));
    const { event, send } = copies();
    expect((await post(url, await send())).status).toBe(503);
    expect(await effects(event.id)).toBe(0);
    expect((await post(url, await send())).status).toBe(204);
    expect(await effects(event.id)).toBe(1);
    expect(runs).toBe(2);
  });

  it("Express, res.status(503).send() after the writes: 503, rolled back, and the retry runs the handler again", async () => {
    let runs = 0;
    const url = await effectReceiver(new PostgresInbox(pool(), { scope: "express-503" }), (_event, _tx, res) => {
      runs++;
      if (runs === 1) res.status(503).send("later");
    });
    const { event, send } = copies();
    expect((await post(url, await send())).status).toBe(503);
    expect(await effects(event.id)).toBe(0);
    expect((await post(url, await send())).status).toBe(204);
    expect(await effects(event.id)).toBe(1);
  });

  it("one reading of a result: { statusCode: 200, body, status: 'ok' } is 200 and committed in Lambda, a 500 and rolled back in Express", async () => {
    const result = { statusCode: 200, body: "ok", status: "ok" };
    const inbox = new PostgresInbox(pool(), { scope: "one-reading" });
    const write = inbox.handle(async (event, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
      return result;
    });
    const lambda = lambdaHandler({ secret: SECRET, onEvent: write });
    const inLambda = copies();
    const signed = await inLambda.send();
    const answer = await lambda(
      { httpMethod: "POST", headers: signed.headers, body: signed.body },
      { awsRequestId: "r", getRemainingTimeInMillis: () => 1000 },
    );
    expect(answer).toMatchObject({ statusCode: 200, body: "ok" });
    expect(await effects(inLambda.event.id)).toBe(1);

    const url = await serve(expressServer({ secret: SECRET, onError: () => {}, onEvent: write }));
    const inExpress = copies();
    expect((await post(url, await inExpress.send())).status).toBe(500);
    expect(await effects(inExpress.event.id)).toBe(0);
  });

  it("committed exactly when answered 2xx, for every kind of result each adapter reads (fetch Response, Lambda result, reply)", async () => {
    const inbox = new PostgresInbox(pool(), { scope: "results" });
    const results: unknown[] = [
      null,
      undefined,
      "text",
      { body: "no status" },
      { status: 200 },
      { status: 299 },
      { status: 199 },
      { status: 300 },
      { status: 503 },
      { status: "200" },
      { status: 250.5 },
      { statusCode: 201 },
      { statusCode: 503 },
      { statusCode: "204" },
      { statusCode: "503", body: "busy" },
      { statusCode: 200, body: { ok: true } },
      { statusCode: 200, body: "ok", status: "ok" },
      new Response(null, { status: 503 }),
      new Response(null, { status: 202 }),
      Object.assign(Object.create({}), { status: 503 }),
      Object.assign(Object.create(null), { status: 503 }),
    ];
    let next = 0;
    const write = inbox.handle(async (event, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
      // Each call returns a fresh copy: a Response's body can be read once.
      const result = results[next];
      return result instanceof Response ? new Response(null, { status: result.status }) : result;
    });
    const fetchReceiver = webhookHandler({ secret: SECRET, onError: () => {}, onEvent: write });
    const lambda = lambdaHandler({ secret: SECRET, onError: () => {}, onEvent: write });
    for (next = 0; next < results.length; next++) {
      const label = String(JSON.stringify(results[next]) ?? results[next]);
      const viaFetch = copies();
      const answered = await fetchReceiver(await signedRequest({ secret: SECRET, event: viaFetch.event }));
      expect(await effects(viaFetch.event.id), `fetch ${label} → ${answered.status}`).toBe(
        answered.status >= 200 && answered.status <= 299 ? 1 : 0,
      );
      const viaLambda = copies();
      const signed = await viaLambda.send();
      const result = await lambda(
        { httpMethod: "POST", headers: signed.headers, body: signed.body },
        { awsRequestId: "r", getRemainingTimeInMillis: () => 1000 },
      );
      expect(await effects(viaLambda.event.id), `lambda ${label} → ${result.statusCode}`).toBe(
        result.statusCode >= 200 && result.statusCode <= 299 ? 1 : 0,
      );
    }
  });

  it("a 2xx reply that cannot be sent (a header name, a body JSON cannot hold) is a 500 decided before anything commits", async () => {
    const replies = [
      { status: 200, headers: { "bad name": "x" } },
      { status: 200, body: { count: 1n } },
    ];
    let next = 0;
    const url = await effectReceiver(new PostgresInbox(pool(), { scope: "unsendable" }), () => replies[next++], {
      onError: () => {},
    });
    for (const _reply of replies) {
      const { event, send } = copies();
      expect((await post(url, await send())).status).toBe(500);
      expect(await effects(event.id)).toBe(0);
    }
  });

  it("a handler that ends the transaction itself never gets a 2xx: a COMMIT sent past the inbox's savepoints (pg's own query method)", async () => {
    // pg.Client's query method called on tx itself goes around the inbox's reading of statements:
    // the one way left to send COMMIT through tx without it becoming a savepoint, or refused.
    const inbox = new PostgresInbox(pool(), { scope: "ended-by-handler" });
    const errors: unknown[] = [];
    const url = await serve(
      expressServer({
        secret: SECRET,
        onError: (error) => void errors.push(error),
        onEvent: inbox.handle(async (event, tx) => {
          const query = pg.Client.prototype.query as (this: unknown, text: string) => Promise<unknown>;
          await query.call(tx, "commit");
          // Outside the inbox's transaction now: this write commits on its own.
          await tx.query("insert into effects (event_id) values ($1)", [event.id]);
        }),
      }),
    );
    const { send } = copies();
    expect((await post(url, await send())).status).toBe(503);
    expect(errors.map((error) => String((error as Error).message))).toEqual([
      expect.stringMatching(/ended by the handler/),
    ]);
    expect(await openTransactions()).toBe(0);
  });

  it("a COMMIT or a ROLLBACK through tx with no BEGIN of the handler's is refused: swallowed, the inbox's transaction goes on, once", async () => {
    const inbox = new PostgresInbox(pool(), { scope: "refused-ends" });
    const url = await effectReceiver(inbox, async (event, tx) => {
      for (const end of ["commit", "rollback"]) await tx.query(end).catch(() => {});
      await tx.query("insert into effects (event_id) values ($1)", [`${event.id}-after`]);
    });
    const { event, send } = copies();
    expect((await post(url, await send())).status).toBe(204);
    expect((await post(url, await send())).status).toBe(204);
    expect([await effects(event.id), await effects(`${event.id}-after`)]).toEqual([1, 1]);
    expect(await openTransactions()).toBe(0);
  });

  it("a handler that also queries the pool it runs in never wedges the receiver, under pg's default of waiting for ever for a connection", async () => {
    // Four connections for eight concurrent deliveries, and a handler that needs one more.
    const shared = pool(4);
    const inbox = new PostgresInbox(shared, { scope: "pool-wait", lockTimeout: 100, timeout: 300 });
    const url = await effectReceiver(
      inbox,
      async () => {
        await shared.query("select pg_sleep(0.05)");
      },
      { onError: () => {} },
    );
    const events = Array.from({ length: 8 }, () => copies());
    const first = await Promise.all(events.map(async ({ send }) => post(url, await send())));
    for (const answer of first) {
      expect(answer.status === 204 || answer.status >= 500, JSON.stringify(answer)).toBe(true);
      // The inbox's own wait for a connection is bounded by its timeout, and asks for a retry.
      if (answer.status === 503) expect(answer.retryAfter).toBe("10");
    }
    await sleep(100);
    expect(await openTransactions()).toBe(0);
    // The sender retries what failed, one at a time: each event ends with exactly one effect row.
    for (const [index, { send }] of events.entries()) {
      if (first[index]?.status !== 204) expect((await post(url, await send())).status).toBe(204);
    }
    for (const { event } of events) expect(await effects(event.id)).toBe(1);
    expect(await openTransactions()).toBe(0);
  });

  it("a receiver refuses an inbox that forgets ids sooner than maxAge plus twice the clock-skew allowance", () => {
    const inbox = new PostgresInbox(pool(), { scope: "short-retention", retention: "2s" });
    const handler = inbox.handle(async () => {});
    expect(() => expressMiddleware({ secret: SECRET, maxAge: "5m", onEvent: handler })).toThrow(
      /the inbox's retention \(2000 ms\) is shorter than maxAge plus twice the 60 s clock-skew allowance \(420000 ms\)/,
    );
    expect(() => expressMiddleware({ secret: SECRET, onEvent: handler })).not.toThrow();
  });

  it("an inbox wrapped in another function or a router is still checked, at its first delivery: 500, nothing committed", async () => {
    const inbox = new PostgresInbox(pool(), { scope: "short-wrapped", retention: "2s" });
    const errors: unknown[] = [];
    const write = inbox.handle(async (event: WebhookEvent, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
    });
    const url = await serve(
      expressServer({
        secret: SECRET,
        maxAge: "5m",
        onError: (error) => void errors.push(error),
        onEvent: createRouter().onAny((event) => write(event)),
      }),
    );
    const { event, send } = copies();
    expect((await post(url, await send())).status).toBe(500);
    expect(await effects(event.id)).toBe(0);
    expect(errors).toEqual([expect.objectContaining({ name: "TypeError" })]);
  });

  it("ids Postgres cannot hold as they are (a NUL, 3 KB, one spelled like a hash) or that look like SQL are each handled once through handle()", async () => {
    const inbox = new PostgresInbox(pool(), { scope: "hostile-ids" });
    let runs = 0;
    const receive = webhookHandler({
      secret: SECRET,
      onEvent: inbox.handle(async (event, tx) => {
        runs++;
        await tx.query("insert into effects (event_id) values ($1)", [`hostile-${event.id.length}`]);
      }),
    });
    const long = `evt_${"x".repeat(3000)}`;
    // And ids that would be SQL if written into a statement as they are: the first statement of
    // the transaction carries the id as a literal (one round trip on pg).
    const sql = ["evt_'; drop table effects; --", "evt_\\'\\", "evt_$1$$ $x$", "evt_é✓😀", "evt_') or ('1'='1"];
    const ids = ["evt_\u0000nul", long, `#${"0".repeat(64)}`, ...sql];
    for (const id of ids) {
      const event = createEvent("flag.updated", { id });
      const first = await receive(await signedRequest({ secret: SECRET, event }));
      const again = await receive(await signedRequest({ secret: SECRET, event }));
      expect([first.status, again.status, again.headers.get("webhook-duplicate")], JSON.stringify(id)).toEqual([
        204,
        204,
        "true",
      ]);
    }
    expect(runs).toBe(ids.length);
    // Stored as they are, character for character.
    for (const id of sql) {
      const { rows } = await database.admin.query(
        "select count(*) from flag_webhooks_inbox where scope = $1 and id = $2",
        ["hostile-ids", id],
      );
      expect(Number(rows[0].count), id).toBe(1);
    }
  });

  it("a table named with 63 characters gets an index of its own, which prune() uses", async () => {
    const table = `t${"x".repeat(62)}`;
    const inbox = new PostgresInbox(pool(), { scope: "long-table", table });
    await inbox.migrate();
    await inbox.migrate();
    const { rows } = await database.admin.query("select indexname, indexdef from pg_indexes where tablename = $1", [
      table,
    ]);
    const expires = rows.filter((row) => /\(scope, expires_at\)/.test(row.indexdef));
    expect(expires).toHaveLength(1);
    expect(expires[0].indexname).toMatch(/^tx+_[0-9a-f]{8}_expires$/);
    expect(expires[0].indexname).toHaveLength(63);
    // A second long table whose name begins the same way gets an index of its own too.
    const other = `${table.slice(0, 62)}y`;
    await new PostgresInbox(pool(), { scope: "long-table", table: other }).migrate();
    const both = await database.admin.query("select count(*) from pg_indexes where indexname like '%\\_expires'");
    expect(Number(both.rows[0].count)).toBeGreaterThanOrEqual(3);
    await expect(inbox.prune()).resolves.toBe(0);
  });
});
