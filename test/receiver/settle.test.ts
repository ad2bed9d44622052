import { createServer, type Server } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import express from "express";
import {
  createRouter,
  MemoryDedupeStore,
  MemoryOrderStore,
  type OrderStore,
  STALE_HEADER,
  type Telemetry,
} from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent, signedDelivery, signedRequest } from "flag-webhooks/testing";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { attempt, serverPerTest, urlOf } from "../support/http.js";
import { databaseFile } from "../support/sqlite.js";

// The receiver's one decision: a delivery is handled when its handler finished and its final
// answer is 2xx, decided once both are known. A claim is never released while the handler runs,
// whoever answered meanwhile (a response-timeout layer: ./retry-storm.test.ts, timed apart from
// these), and an answer cut mid-way settles too.

const SECRET = "whsec-settle";
const listenPerTest = serverPerTest();
const serve = async (server: Server) => urlOf(await listenPerTest(server));

/** A Telemetry that records how each delivery ended. */
function recording() {
  const ended: { outcome: string; status: number | undefined }[] = [];
  const telemetry: Telemetry = {
    delivery: () => ({
      verified() {},
      store() {},
      run: (handler) => handler(),
      handler() {},
      end: (outcome, status) => void ended.push({ outcome, status }),
    }),
  };
  return { telemetry, ended };
}

describe("an Express route that begins its answer and then fails (next(err) after res.write)", () => {
  function app(options: Parameters<typeof expressMiddleware>[0], runs: { count: number }) {
    const made = express();
    made.post("/webhooks", expressMiddleware(options), (_req, res, next) => {
      runs.count++;
      res.status(200).write("partial");
      next(new Error("failed mid-answer"));
    });
    // Express's own final handler: it cannot answer a response whose head went out, and cuts the socket.
    return made;
  }

  it("with dedupe: the sender sees no 2xx, the claim is released at once (the retry runs, not 409), and the delivery's record ends", async () => {
    const runs = { count: 0 };
    const { telemetry, ended } = recording();
    const url = await serve(
      createServer(
        app(
          { secret: SECRET, telemetry, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" }, onError: () => {} },
          runs,
        ),
      ),
    );
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    expect(await attempt(url, delivery)).not.toBe(200);
    await sleep(50);
    expect(ended).toEqual([{ outcome: "handler_error", status: undefined }]);
    expect(await attempt(url, delivery)).not.toBe(409);
    expect(runs.count).toBe(2);
  });

  it("without dedupe: the delivery's record ends when the socket is cut", async () => {
    const runs = { count: 0 };
    const { telemetry, ended } = recording();
    const url = await serve(createServer(app({ secret: SECRET, telemetry }, runs)));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    expect(await attempt(url, delivery)).not.toBe(204);
    await sleep(50);
    expect(ended).toEqual([{ outcome: "handler_error", status: undefined }]);
  });
});

describe("an Express route that never answers a client that left", () => {
  it("the delivery's record ends when the client closes (client_closed); the claim stands: a retry gets 409", async () => {
    const { telemetry, ended } = recording();
    const app = express();
    app.post(
      "/webhooks",
      expressMiddleware({ secret: SECRET, telemetry, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      (req) => {
        // Never answers: it waits for the client, which is gone.
        req.on("close", () => {});
      },
    );
    const url = await serve(createServer(app));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    const controller = new AbortController();
    const gone = fetch(url, {
      method: "POST",
      body: delivery.body,
      headers: delivery.headers,
      signal: controller.signal,
    });
    await sleep(100);
    controller.abort();
    await gone.catch(() => {});
    await sleep(100);
    expect(ended).toEqual([{ outcome: "client_closed", status: undefined }]);
    expect(await attempt(url, delivery)).toBe(409);
  });
});

describe("dedupe.ttl covers the replay window on every receiver of a fleet", () => {
  it("two receivers on one store, clocks 5 s apart: an event dated a minute ahead is never run twice, whenever a copy reaches the other", async () => {
    let real = Date.parse("2026-11-26T12:00:00Z");
    const store = new MemoryDedupeStore({ now: () => real });
    let runs = 0;
    const receiver = (skew: number) =>
      webhookHandler({
        secret: SECRET,
        maxAge: "5m",
        now: () => real + skew,
        dedupe: { store, ttl: "7m" },
        onEvent: () => void runs++,
      });
    const ahead = receiver(0);
    const behind = receiver(-5000);
    const event = createEvent("flag.updated", { createdAt: new Date(real + 60_000).toISOString() });
    expect((await ahead(await signedRequest({ secret: SECRET, event }))).status).toBe(204);
    for (let second = 1; second <= 400; second++) {
      real += 1000;
      const answer = await behind(await signedRequest({ secret: SECRET, event }));
      expect([204, 401], `${second} s later`).toContain(answer.status);
    }
    expect(runs).toBe(1);
  });

  it("refuses a ttl that would not: shorter than maxAge plus twice the minute of skew allowed", () => {
    const store = new MemoryDedupeStore();
    expect(() =>
      webhookHandler({ secret: SECRET, maxAge: "5m", dedupe: { store, ttl: "6m" }, onEvent: () => {} }),
    ).toThrow(/shorter than maxAge plus twice the 60 s clock-skew allowance/);
  });
});

describe("a handler that threw while the answer on the wire is 2xx", () => {
  it("Koa, an outer error handler that answers 200 anyway: not handled; the 2xx is replaced by the error's 500, the claim released, and the retry runs it again", async () => {
    const store = new MemoryDedupeStore();
    let runs = 0;
    const app = new Koa();
    app.use(async (ctx, next) => {
      try {
        await next();
      } catch {
        // An app that swallows errors and still answers 200: the sender sees a 2xx.
        ctx.status = 200;
        ctx.body = "ok anyway";
      }
    });
    app.use(koaMiddleware({ secret: SECRET, dedupe: { store, ttl: "1h" } }));
    app.use(() => {
      runs++;
      throw new Error("the handler failed");
    });
    const url = await serve(createServer(app.callback()));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    expect(await attempt(url, delivery)).toBe(500);
    expect(await attempt(url, delivery)).toBe(500);
    expect(runs).toBe(2);
  });
});

describe("a decision that waits for nothing is given at once, and its answer is never held", () => {
  it("Express, a memory store: the claim is made before next() returns, and the route's 2xx is Node's own when end() returns; a copy is a duplicate", async () => {
    const nextAtOnce: boolean[] = [];
    const middleware = expressMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } });
    const app = express();
    let writtenAtEnd = false;
    app.post(
      "/webhooks",
      express.raw({ type: "*/*" }),
      (req, res, next) => {
        let atOnce = false;
        void middleware(req, res, (error?: unknown) => {
          atOnce = true;
          next(error);
        });
        nextAtOnce.push(atOnce);
      },
      (_req, res) => {
        res.sendStatus(204);
        // Node sets `finished` when its own end() ran: a held answer has not reached it yet.
        writtenAtEnd = res.finished;
      },
    );
    const url = await serve(createServer(app));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    expect(await attempt(url, delivery)).toBe(204);
    expect(writtenAtEnd).toBe(true);
    const copy = await fetch(url, { method: "POST", body: delivery.body, headers: delivery.headers });
    expect([copy.status, copy.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
    // The copy is answered by the middleware, a duplicate: no next() at all.
    expect(nextAtOnce).toEqual([true, false]);
  });
});

describe("a settlement with an inbox's transaction in it (SQLite, better-sqlite3 on a file)", () => {
  const dbs: Database.Database[] = [];
  afterEach(() => {
    for (const db of dbs.splice(0)) db.close();
  });

  /** A SqliteInbox on a new WAL file with an effects table, and a second connection to read what was committed. */
  async function sqliteInbox(options: { retention?: string } = {}) {
    const file = databaseFile();
    const db = new Database(file);
    db.pragma("journal_mode = wal");
    db.exec("create table effects (event_id text not null)");
    const reader = new Database(file, { readonly: true });
    dbs.push(db, reader);
    const inbox = new SqliteInbox(db, { scope: "settle", ...options });
    await inbox.migrate();
    const committed = () => (reader.prepare("select count(*) as n from effects").get() as { n: number }).n;
    return { inbox, committed, db };
  }

  it("the record tells an inbox's first delivery (handled) from its copy (duplicate), both 204", async () => {
    const { inbox } = await sqliteInbox();
    const { telemetry, ended } = recording();
    const receive = webhookHandler({
      secret: SECRET,
      telemetry,
      onEvent: inbox.handle((event, tx) => {
        tx.prepare("insert into effects (event_id) values (?)").run(event.id);
      }),
    });
    const event = createEvent("flag.updated");
    const first = await receive(await signedRequest({ secret: SECRET, event }));
    const copy = await receive(await signedRequest({ secret: SECRET, event }));
    expect([first.status, copy.status, copy.headers.get("webhook-duplicate")]).toEqual([204, 204, "true"]);
    expect(ended).toEqual([
      { outcome: "handled", status: 204 },
      { outcome: "duplicate", status: 204 },
    ]);
  });

  it("Express, an inbox's handler that answers 200 on res and goes on: the 200 leaves only once its transaction committed", async () => {
    const { inbox, committed } = await sqliteInbox();
    const errors: unknown[] = [];
    const app = express();
    app.post(
      "/webhooks",
      expressMiddleware<express.Request, express.Response>({
        secret: SECRET,
        onError: (error) => errors.push(error),
        onEvent: inbox.handle(async (event, tx, _req, res: express.Response) => {
          tx.prepare("insert into effects (event_id) values (?)").run(event.id);
          res.status(200).send("ok");
          // Still in the transaction: a 200 let out now would reach the sender before the COMMIT.
          await sleep(150);
        }),
      }),
    );
    const url = await serve(createServer(app));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    expect(await attempt(url, delivery)).toBe(200);
    expect(committed()).toBe(1);
    expect(errors).toEqual([]);
  });

  it("Express, the app's onEvent runs an inbox's handler and then fails: the inbox's transaction rolls back with the delivery", async () => {
    const { inbox, committed, db } = await sqliteInbox();
    const handle = inbox.handle((event, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    });
    const app = express();
    app.post(
      "/webhooks",
      expressMiddleware({
        secret: SECRET,
        onError: () => {},
        onEvent: async (event) => {
          // Nothing to settle was known when the receiver accepted this delivery: its answer is
          // watched from the moment the inbox enlists.
          await handle(event);
          throw new Error("failed after the inbox's handler");
        },
      }),
    );
    const url = await serve(createServer(app));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    expect(await attempt(url, delivery)).toBe(500);
    expect([committed(), db.inTransaction]).toEqual([0, false]);
  });

  it("a router's inbox whose retention is shorter than the replay window allows: the delivery fails, naming the inbox's retention, and nothing is committed", async () => {
    const { inbox, committed } = await sqliteInbox({ retention: "30m" });
    const errors: unknown[] = [];
    const router = createRouter().on(
      "flag.updated",
      inbox.handle((event, tx) => {
        tx.prepare("insert into effects (event_id) values (?)").run(event.id);
      }),
    );
    const receive = webhookHandler({ secret: SECRET, maxAge: "1h", onEvent: router, onError: (e) => errors.push(e) });
    const answer = await receive(await signedRequest({ secret: SECRET, event: createEvent("flag.updated") }));
    expect(answer.status).toBe(500);
    expect(committed()).toBe(0);
    expect(errors).toEqual([
      new TypeError(
        "flag-webhooks: the inbox's retention (1800000 ms) is shorter than maxAge plus twice the 60 s clock-skew " +
          "allowance (3720000 ms): a captured delivery could be replayed after its id is forgotten, by a receiver " +
          "whose clock is behind the one that handled it; make it at least that long",
      ),
    ]);
  });

  it.each([
    ["with telemetry and dedupe", true],
    ["with neither", false],
  ])(
    "a COMMIT that fails with three inboxes enlisted, %s: 503, the others rolled back, the claim released, the record ends store_unavailable",
    async (_case, recorded) => {
      // The first inbox's COMMIT fails: a deferred foreign key is checked only then.
      const failing = await sqliteInbox();
      failing.db.pragma("foreign_keys = on");
      failing.db.exec(
        "create table parents (id text primary key); " +
          "create table children (parent text references parents (id) deferrable initially deferred)",
      );
      const [second, third] = [await sqliteInbox(), await sqliteInbox()];
      const write = (event: { id: string }, tx: Database.Database) =>
        void tx.prepare("insert into effects (event_id) values (?)").run(event.id);
      const orphan = failing.inbox.handle((event, tx) => {
        write(event, tx);
        tx.prepare("insert into children (parent) values (?)").run("no such parent");
      });
      const [two, three] = [second.inbox.handle(write), third.inbox.handle(write)];
      const { telemetry, ended } = recording();
      const errors: unknown[] = [];
      let runs = 0;
      const receive = webhookHandler({
        secret: SECRET,
        ...(recorded ? { telemetry, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } } : {}),
        onError: (error) => errors.push(error),
        onEvent: async (event) => {
          runs++;
          await orphan(event);
          await two(event);
          await three(event);
        },
      });
      const event = createEvent("flag.updated");
      const answer = await receive(await signedRequest({ secret: SECRET, event }));
      expect([answer.status, await answer.json()]).toEqual([
        503,
        { error: { code: "store_unavailable", message: "the store did not record the event; retry later" } },
      ]);
      expect(ended).toEqual(recorded ? [{ outcome: "store_unavailable", status: 503 }] : []);
      expect(errors).toHaveLength(1);
      expect(String(errors[0])).toMatch(/FOREIGN KEY constraint failed/);
      const stores = [failing, second, third];
      expect(stores.map((store) => store.committed())).toEqual([0, 0, 0]);
      expect(stores.map((store) => store.db.inTransaction)).toEqual([false, false, false]);
      // Released: the retry runs the handler again (neither 409 nor a duplicate).
      expect((await receive(await signedRequest({ secret: SECRET, event }))).status).toBe(503);
      expect(runs).toBe(2);
    },
  );

  it("an inbox's handler that threw, its error caught by onEvent, which answers 2xx: none of its writes commit", async () => {
    const { inbox, committed, db } = await sqliteInbox();
    let fail = true;
    const handle = inbox.handle((event, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
      if (fail) throw new Error("failed half-way");
    });
    const caught: unknown[] = [];
    const receive = webhookHandler({
      secret: SECRET,
      onEvent: async (event) => {
        try {
          return await handle(event);
        } catch (error) {
          // "Best effort": the app logs the failure and answers 2xx all the same.
          caught.push(error);
          return undefined;
        }
      },
    });
    const event = createEvent("flag.updated");
    expect((await receive(await signedRequest({ secret: SECRET, event }))).status).toBe(204);
    expect(caught.map(String)).toEqual(["Error: failed half-way"]);
    // The inbox's handler threw: its transaction rolls back, as it does when the error reaches the receiver.
    expect([committed(), db.inTransaction]).toEqual([0, false]);
    // Nor is the id recorded: a copy runs the handler again.
    fail = false;
    const copy = await receive(await signedRequest({ secret: SECRET, event }));
    expect([copy.status, copy.headers.get("webhook-duplicate"), committed()]).toEqual([204, null, 1]);
  });

  it("an inbox that enlists only after the delivery was decided (onEvent did not await it) commits on its own", async () => {
    const { inbox, committed, db } = await sqliteInbox();
    const handle = inbox.handle((event, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    });
    // A first run holds the connection's turn until `open()`: the delivery's inbox waits for it,
    // and enlists only once the receiver has answered and decided.
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const holding = inbox.handle(async (event, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
      await gate;
    })(createEvent("flag.updated"));
    const late: Promise<unknown>[] = [];
    const receive = webhookHandler({
      secret: SECRET,
      onEvent: (event) => {
        late.push(handle(event));
      },
    });
    const answer = await receive(await signedRequest({ secret: SECRET, event: createEvent("flag.updated") }));
    expect(answer.status).toBe(204);
    open();
    await holding;
    await Promise.all(late);
    // Not enlisted in a decision already taken, where nothing would commit it: its transaction left open.
    expect(committed()).toBe(2);
    expect(db.inTransaction).toBe(false);
  });

  it("Express, onEvent answers 200 on res and then runs two inboxes' handlers: both commit on their own", async () => {
    const first = await sqliteInbox();
    const second = await sqliteInbox();
    const write = (event: { id: string }, tx: Database.Database) =>
      void tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    const [one, two] = [first.inbox.handle(write), second.inbox.handle(write)];
    const app = express();
    app.post(
      "/webhooks",
      expressMiddleware<express.Request, express.Response>({
        secret: SECRET,
        onEvent: async (event, _req, res: express.Response) => {
          res.status(200).send("ok");
          // The answer has left: nothing can hold it for either inbox, and no decision will come.
          await one(event);
          await two(event);
        },
      }),
    );
    const url = await serve(createServer(app));
    expect(await attempt(url, await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") }))).toBe(200);
    await sleep(100);
    expect([first.committed(), second.committed()]).toEqual([1, 1]);
    expect([first.db.inTransaction, second.db.inTransaction]).toEqual([false, false]);
  });
});

describe("an event all of whose changes are stale, settled without a handler", () => {
  /** A flag.updated event of `flag` at `createdAt`, turning it on. */
  const updated = (createdAt: string) =>
    createEvent("flag.updated", {
      createdAt,
      data: { flag: "dark-mode", changes: [{ path: "on", from: null, to: true }] },
    });

  it("its positions not written, with neither dedupe nor telemetry: 503, the store's failure reported once", async () => {
    const memory = new MemoryOrderStore();
    let lapsed = false;
    const store: OrderStore = {
      retention: memory.retention,
      async hold(flag, lease) {
        const held = await memory.hold(flag, lease);
        if (!lapsed) return held;
        return { ...held, commit: () => held.release().then(() => Promise.reject(new Error("the hold ran out"))) };
      },
    };
    const errors: unknown[] = [];
    const receive = webhookHandler({
      secret: SECRET,
      order: { store },
      onError: (error) => errors.push(error),
      onEvent: () => {},
    });
    const send = async (event: object) => receive(await signedRequest({ secret: SECRET, event }));
    expect((await send(updated("2026-11-27T09:02:00Z"))).status).toBe(204);
    lapsed = true;
    expect((await send(updated("2026-11-27T09:01:00Z"))).status).toBe(503);
    lapsed = false;
    const stale = await send(updated("2026-11-27T09:01:30Z"));
    expect([stale.status, stale.headers.get(STALE_HEADER)]).toEqual([204, "true"]);
    expect(errors.map(String)).toEqual(["Error: the hold ran out"]);
  });

  it("its positions not written (the hold ran out): 503, the claim released, the record ends store_unavailable; the retry is settled stale, a copy then a duplicate", async () => {
    const memory = new MemoryOrderStore();
    let lapsed = false;
    // The store's answer when the hold's lease ran out meanwhile: the hold is over, nothing written.
    const store: OrderStore = {
      retention: memory.retention,
      async hold(flag, lease) {
        const held = await memory.hold(flag, lease);
        if (!lapsed) return held;
        return {
          positions: held.positions,
          commit: async () => {
            await held.release();
            throw new Error("the hold on the flag ran out");
          },
          release: () => held.release(),
        };
      },
    };
    const { telemetry, ended } = recording();
    const errors: unknown[] = [];
    let runs = 0;
    const receive = webhookHandler({
      secret: SECRET,
      telemetry,
      order: { store },
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      onError: (error) => errors.push(error),
      onEvent: () => void runs++,
    });
    const send = async (event: object) => receive(await signedRequest({ secret: SECRET, event }));
    expect((await send(updated("2026-11-27T09:02:00Z"))).status).toBe(204);
    const stale = updated("2026-11-27T09:01:00Z");
    lapsed = true;
    const refused = await send(stale);
    expect([refused.status, await refused.json()]).toEqual([
      503,
      { error: { code: "store_unavailable", message: "the store did not record the event; retry later" } },
    ]);
    expect(errors.map(String)).toEqual(["Error: the hold on the flag ran out"]);
    lapsed = false;
    const retried = await send(stale);
    expect([retried.status, retried.headers.get(STALE_HEADER)]).toEqual([204, "true"]);
    const copy = await send(stale);
    expect([copy.status, copy.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
    expect(runs).toBe(1);
    expect(ended).toEqual([
      { outcome: "handled", status: 204 },
      { outcome: "store_unavailable", status: 503 },
      { outcome: "stale", status: 204 },
      { outcome: "duplicate", status: 204 },
    ]);
  });
});
