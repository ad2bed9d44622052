import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createServer as createNetServer } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { sql as drizzleSql, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/node-postgres";
import { createRouter, type WebhookEvent } from "flag-webhooks";
import { type InboxClient, type PostgresClient, PostgresInbox } from "flag-webhooks/postgres";
import { CompiledQuery, Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import postgres from "postgres";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  ADAPTERS,
  type AdapterName,
  adapterReceiver,
  closeReceivers,
  type ReceiverOptions,
  type Send,
} from "../../support/adapter-receivers.js";
import { eventJson, signatureOf } from "../../support/deliveries.js";
import { expectExactlyOnce } from "../../support/inbox-handle.js";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { describeStoreContract, expectScopeChecked } from "../../support/store-contract.js";

// flag-webhooks/postgres against a real PostgreSQL (test/support/postgres-server.ts): the
// DedupeStore contract over each client, and the transactional inbox's answers through the
// Express, Koa, fetch and Lambda adapters, with the handler's writes checked in the database.

const availability = postgresAvailability();
const skip = availability.available ? undefined : availability.reason;
const SECRET = "whsec-postgres-inbox-test";

let server: TestDatabase | undefined;
let admin: pg.Pool;
async function database(): Promise<TestDatabase> {
  if (!server) {
    server = await testDatabase();
    admin = new pg.Pool({ connectionString: server.url, max: 4 });
    await new PostgresInbox(admin, { scope: "setup" }).migrate();
    await admin.query("create table if not exists effects (event_id text not null, note text)");
  }
  return server;
}
afterAll(async () => {
  await admin?.end();
  await server?.close();
  server = undefined;
});

const pools: { end(): Promise<void> }[] = [];
afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end()));
});
function pgPool(max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString: server?.url, max });
  pools.push(pool);
  return pool;
}
/** One pg Client (of `Client`'s class), connected, ended after the file. */
async function pgClient(Client: typeof pg.Client = pg.Client): Promise<pg.Client> {
  const client = new Client({ connectionString: server?.url });
  await client.connect();
  pools.push(client);
  return client;
}
function postgresJs(): postgres.Sql {
  const sql = postgres(server?.url as string, { max: 10, onnotice: () => {} });
  pools.push(sql);
  return sql;
}

/** The store contract over inboxes of one scope on the clients `client` gives: the store, its peer, another scope. */
function describeInboxContract(
  name: string,
  scope: string,
  client: (role: "store" | "peer" | "other") => PostgresClient | Promise<PostgresClient>,
  extra?: () => void,
) {
  describeStoreContract(
    `PostgresInbox over ${name}`,
    {
      skip,
      shared: true,
      scoped: true,
      async make() {
        await database();
        return {
          store: new PostgresInbox(await client("store"), { scope }),
          peer: new PostgresInbox(await client("peer"), { scope }),
          otherScope: new PostgresInbox(await client("other"), { scope: `${scope}-other` }),
        };
      },
    },
    extra,
  );
}

describeInboxContract(
  "a pg Pool",
  "contract-pg",
  () => pgPool(),
  () => {
    // The contract's ids include some that would be SQL if written into a statement as they are.
    it("ids that look like SQL drop nothing: the effects table is still there", async () => {
      expect((await admin.query("select count(*)::int as n from effects")).rows[0].n).toBeGreaterThanOrEqual(0);
    });
  },
);
describeInboxContract("postgres.js", "contract-js", () => postgresJs());
// The store and the other scope share the one Client; the peer is another process's pool.
let oneClient: Promise<pg.Client> | undefined;
describeInboxContract("one pg Client", "contract-client", (role) => {
  if (role === "peer") return pgPool();
  oneClient ??= pgClient();
  return oneClient;
});

describe("PostgresInbox options", () => {
  const pool = new pg.Pool({ connectionString: "postgres://127.0.0.1:1/none" });
  afterAll(() => pool.end());

  it("requires a scope of 1-100 characters of A-Z a-z 0-9 . _ -, naming the option", () => {
    expectScopeChecked("PostgresInbox", (scope) => new PostgresInbox(pool, { scope } as never));
    expect(() => new PostgresInbox(pool, undefined as never)).toThrow(/"scope"/);
  });

  it("refuses a table name that is not an identifier, and a client it does not know", () => {
    for (const table of ['x"; drop table y; --', "a.b.c", "1abc", ""]) {
      expect(() => new PostgresInbox(pool, { scope: "s", table })).toThrow(/option "table"/);
    }
    expect(() => new PostgresInbox({} as never, { scope: "s" })).toThrow(/pg Pool or Client, a postgres.js sql/);
    expect(() => new PostgresInbox(pool, { scope: "s", retention: "soon" })).toThrow(/retention/);
    // A copy in flight must get its 409 before the inbox gives up on Postgres with a 503.
    expect(() => new PostgresInbox(pool, { scope: "s", lockTimeout: "5s", timeout: "5s" })).toThrow(
      /"lockTimeout" must be shorter than "timeout"/,
    );
    // Its own steps wait on timers, which wait at most 2³¹−1 ms (Node fires a longer one after 1 ms).
    expect(() => new PostgresInbox(pool, { scope: "s", timeout: 2 ** 31 })).toThrow(
      /option "timeout" must be at most 2147483647 ms/,
    );
    expect(() => new PostgresInbox(pool, { scope: "s", timeout: 2 ** 31 - 1 })).not.toThrow();
  });
});

// ---------------------------------------------------------------------------------------------
// The answers of handle(), through each adapter.

const body = (id: string) => eventJson(id);
const sign = (text: string) => signatureOf(SECRET, text);
afterAll(closeReceivers);

/** A receiver of the adapter, running `onEvent`; returns how to deliver to it. */
const receiver = (adapter: AdapterName, onEvent: ReceiverOptions["onEvent"]) =>
  adapterReceiver(adapter, { secret: SECRET, onEvent });

async function effects(id: string): Promise<number> {
  return (await admin.query("select count(*)::int as n from effects where event_id = $1", [id])).rows[0].n;
}
async function inboxRows(id: string): Promise<number> {
  return (await admin.query("select count(*)::int as n from flag_webhooks_inbox where id = $1", [id])).rows[0].n;
}

/** What the handler does for an event: by a word in its id. */
type Behaviour = "ok" | "throw" | "reply-503" | "gate";
function behaviour(id: string): Behaviour {
  const word = id.split(":")[0];
  return word === "throw" || word === "reply-503" || word === "gate" ? word : "ok";
}

describe.skipIf(skip !== undefined)("PostgresInbox.handle() through every adapter (pg Pool)", () => {
  let pool: pg.Pool;
  let runs: Map<string, number>;
  let failOnce: Set<string>;
  let gates: Map<string, { entered: () => void; open: Promise<void> }>;

  beforeAll(async () => {
    await database();
    pool = pgPool(20);
  });
  beforeEach(() => {
    runs = new Map();
    failOnce = new Set();
    gates = new Map();
  });

  const handler = async (event: WebhookEvent, tx: pg.PoolClient) => {
    runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
    await tx.query("insert into effects (event_id) values ($1)", [event.id]);
    const kind = behaviour(event.id);
    const first = !failOnce.has(event.id);
    if (first) failOnce.add(event.id);
    if (kind === "throw" && first) throw new Error("the handler failed after writing");
    if (kind === "reply-503" && first) return { status: 503, body: { retry: "later" } };
    if (kind === "gate") {
      const gate = gates.get(event.id);
      gate?.entered();
      await gate?.open;
    }
    return undefined;
  };

  /** Holds the handler of `id` once it is inside: `inHandler` resolves then, `open()` lets it finish. */
  const gate = (id: string) => {
    let entered!: () => void;
    let open!: () => void;
    const inHandler = new Promise<void>((resolve) => {
      entered = resolve;
    });
    gates.set(id, { entered, open: new Promise<void>((resolve) => (open = resolve)) });
    return { inHandler, open };
  };

  for (const adapter of ADAPTERS) {
    describe(adapter, () => {
      let send: Send;
      let inbox: PostgresInbox<pg.Pool>;
      beforeAll(async () => {
        inbox = new PostgresInbox(pool, { scope: `cases-${adapter}`, lockTimeout: 300 });
        send = await receiver(adapter, inbox.handle(handler));
      });

      it("a first delivery runs the handler in the transaction, commits, answers 204", async () => {
        const id = `evt_${randomUUID()}`;
        const answer = await send(body(id));
        expect(answer.status).toBe(204);
        expect(answer.headers["webhook-duplicate"]).toBeUndefined();
        expect(runs.get(id)).toBe(1);
        expect(await effects(id)).toBe(1);
        expect(await inboxRows(id)).toBe(1);
      });

      it("a committed id answers a duplicate 204 with webhook-duplicate, without running the handler", async () => {
        const id = `evt_${randomUUID()}`;
        expect((await send(body(id))).status).toBe(204);
        const again = await send(body(id));
        expect(again.status).toBe(204);
        expect(again.headers["webhook-duplicate"]).toBe("true");
        expect(runs.get(id)).toBe(1);
        expect(await effects(id)).toBe(1);
        // No transaction left open: every connection of the pool is idle again.
        expect(pool.totalCount - pool.idleCount).toBe(0);
      });

      it("the same id in an uncommitted transaction elsewhere: a bounded wait, then 409 delivery_in_progress", async () => {
        const id = `gate:${randomUUID()}`;
        const { inHandler, open } = gate(id);
        const first = send(body(id));
        await inHandler;
        const started = performance.now();
        const copy = await send(body(id));
        const waited = performance.now() - started;
        expect(copy.status).toBe(409);
        expect(copy.json?.error?.code).toBe("delivery_in_progress");
        expect(copy.headers["retry-after"]).toMatch(/^\d+$/);
        expect(waited).toBeGreaterThanOrEqual(250); // it waited for the lock, about lockTimeout
        open();
        expect((await first).status).toBe(204);
        expect(runs.get(id)).toBe(1);
        expect(await effects(id)).toBe(1);
        const retry = await send(body(id));
        expect(retry.status).toBe(204);
        expect(retry.headers["webhook-duplicate"]).toBe("true");
      });

      it("a copy that waits for a transaction that commits in time answers duplicate, not 409", async () => {
        const id = `gate:${randomUUID()}`;
        const { inHandler, open } = gate(id);
        const first = send(body(id));
        await inHandler;
        const copy = send(body(id));
        setTimeout(open, 100);
        expect((await first).status).toBe(204);
        const answer = await copy;
        expect(answer.status).toBe(204);
        expect(answer.headers["webhook-duplicate"]).toBe("true");
        expect(await effects(id)).toBe(1);
      });

      it("a handler that throws rolls back its writes (500); the sender's retry runs it again", async () => {
        const id = `throw:${randomUUID()}`;
        const answer = await send(body(id));
        expect(answer.status).toBe(500);
        expect(answer.json?.error?.code).toBe("handler_error");
        expect(await effects(id)).toBe(0);
        expect(await inboxRows(id)).toBe(0);
        expect((await send(body(id))).status).toBe(204);
        expect(runs.get(id)).toBe(2);
        expect(await effects(id)).toBe(1);
      });

      it("a handler that answers non-2xx rolls back too, and that answer is sent; the retry runs it", async () => {
        const id = `reply-503:${randomUUID()}`;
        const answer = await send(body(id));
        expect(answer.status).toBe(503);
        expect(await effects(id)).toBe(0);
        expect(await inboxRows(id)).toBe(0);
        expect((await send(body(id))).status).toBe(204);
        expect(runs.get(id)).toBe(2);
        expect(await effects(id)).toBe(1);
      });
    });
  }

  // The inbox decides commit or roll back from what the handler returned, without knowing the
  // adapter; the adapter decides the answer. They must never disagree towards a loss (a 2xx answer
  // for writes rolled back: the sender never retries) and a retry must end with the writes once.
  const odd: [name: string, make: () => unknown][] = [
    ["{ statusCode: 503 }", () => ({ statusCode: 503 })],
    ['{ statusCode: "503" }', () => ({ statusCode: "503", body: '{"busy":true}' })],
    ["{ statusCode: 201 }", () => ({ statusCode: 201 })],
    ["{ statusCode: 200, body: object }", () => ({ statusCode: 200, body: { ok: true } })],
    ['{ status: "200" }', () => ({ status: "200" })],
    ["{ status: 250.5 }", () => ({ status: 250.5 })],
    ["Response 503", () => new Response('{"busy":true}', { status: 503 })],
    ["Response 200", () => new Response(null, { status: 200 })],
  ];
  for (const adapter of ADAPTERS) {
    it(`${adapter}: whatever the handler returns, a 2xx answer means committed, and a retry leaves the writes once`, async () => {
      const returned = new Map<string, unknown>();
      const inbox = new PostgresInbox(pool, { scope: `odd-${adapter}` });
      const send = await receiver(
        adapter,
        inbox.handle(async (event, tx: pg.PoolClient) => {
          await tx.query("insert into effects (event_id) values ($1)", [event.id]);
          const value = returned.get(event.id);
          returned.delete(event.id); // the retry returns nothing: 204
          return value;
        }),
      );
      for (const [name, make] of odd) {
        const id = `evt_${randomUUID()}`;
        returned.set(id, make());
        const first = await send(body(id));
        const committed = (await effects(id)) === 1;
        const ok = first.status >= 200 && first.status <= 299;
        expect({ name, ok, committed: ok ? committed : "n/a" }).toEqual({ name, ok, committed: ok ? true : "n/a" });
        const retry = await send(body(id));
        expect([name, retry.status]).toEqual([name, 204]);
        expect([name, await effects(id), await inboxRows(id)]).toEqual([name, 1, 1]);
      }
    });
  }

  it.each(ADAPTERS)(
    "%s: Postgres unreachable answers 503 store_unavailable, and the server keeps serving",
    async (adapter) => {
      const down = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:1/postgres" });
      pools.push(down);
      const inbox = new PostgresInbox(down, { scope: "down", lockTimeout: 500, timeout: 1000 });
      let ran = false;
      const send = await receiver(
        adapter,
        inbox.handle(() => {
          ran = true;
        }),
      );
      for (let i = 0; i < 2; i++) {
        const answer = await send(body(`evt_${randomUUID()}`));
        expect(answer.status).toBe(503);
        expect(answer.json?.error?.code).toBe("store_unavailable");
        expect(answer.headers["retry-after"]).toMatch(/^\d+$/);
      }
      expect(ran).toBe(false);
    },
  );
});

describe.skipIf(skip !== undefined)("PostgresInbox when Postgres is slower than the timeout", () => {
  beforeAll(database);

  it("a server that accepts and never answers: 503 store_unavailable within about timeout, handler not run", async () => {
    const sockets: import("node:net").Socket[] = [];
    const blackhole = createNetServer((socket) => {
      socket.on("error", () => {});
      sockets.push(socket);
    });
    await new Promise<void>((resolve) => blackhole.listen(0, "127.0.0.1", resolve));
    const { port } = blackhole.address() as { port: number };
    const hung = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
    hung.on("error", () => {});
    let ran = false;
    const inbox = new PostgresInbox(hung, { scope: "hung", lockTimeout: 100, timeout: 400 });
    const send = await receiver(
      "Express",
      inbox.handle(() => {
        ran = true;
      }),
    );
    const started = performance.now();
    const answer = await send(body(`evt_${randomUUID()}`));
    expect([answer.status, answer.json?.error?.code]).toEqual([503, "store_unavailable"]);
    expect(performance.now() - started).toBeLessThan(3000);
    expect(ran).toBe(false);
    for (const socket of sockets) socket.destroy();
    blackhole.close();
    await hung.end().catch(() => {});
  });

  it("a handler statement slower than timeout is cancelled by statement_timeout: 503, rolled back, retry runs it", async () => {
    const inbox = new PostgresInbox(pgPool(), { scope: "slow", lockTimeout: 100, timeout: 300 });
    let slow = true;
    const send = await receiver(
      "Express",
      inbox.handle(async (event, tx: pg.PoolClient) => {
        await tx.query("insert into effects (event_id) values ($1)", [event.id]);
        if (slow) await tx.query("select pg_sleep(2)");
      }),
    );
    const id = `evt_${randomUUID()}`;
    const answer = await send(body(id));
    expect([answer.status, answer.json?.error?.code]).toEqual([503, "store_unavailable"]);
    expect(await effects(id)).toBe(0);
    slow = false;
    expect((await send(body(id))).status).toBe(204);
    expect(await effects(id)).toBe(1);
  });
});

// ---------------------------------------------------------------------------------------------
// Each client: postgres.js, one pg Client, and the Drizzle and Kysely recipes of docs/postgres.md.

/** The Drizzle recipe of docs/postgres.md: an InboxClient over a Drizzle database on node-postgres. */
function drizzleInbox(pool: pg.Pool) {
  const db = drizzle(pool);
  type Tx = Parameters<Parameters<typeof db.transaction>[0]>[0];
  // $1, $2… as Drizzle parameters.
  const statement = (text: string, params: readonly unknown[]): SQL =>
    drizzleSql.join(
      text.split(/\$(\d+)/).map((part, i) => (i % 2 ? drizzleSql`${params[Number(part) - 1]}` : drizzleSql.raw(part))),
    );
  const client: InboxClient<Tx> = {
    transaction: (fn) => db.transaction(fn),
    query: async (text, params, tx) => (await (tx ?? db).execute(statement(text, params))).rows,
  };
  return client;
}

/** The Kysely recipe of docs/postgres.md: an InboxClient over a Kysely database. */
function kyselyInbox(pool: pg.Pool) {
  const db = new Kysely<{ effects: { event_id: string; note: string | null } }>({
    dialect: new PostgresDialect({ pool }),
  });
  type Tx = Parameters<Parameters<ReturnType<typeof db.transaction>["execute"]>[0]>[0];
  const client: InboxClient<Tx> = {
    transaction: (fn) => db.transaction().execute(fn),
    query: async (text, params, tx) =>
      (await (tx ?? db).executeQuery(CompiledQuery.raw(text, [...params]))).rows as never,
  };
  return { client, db };
}

describe.skipIf(skip !== undefined)("PostgresInbox.handle() with each client", () => {
  beforeAll(database);

  it("postgres.js: tx is the TransactionSql; writes commit with the id, a throw rolls them back", async () => {
    const fails = new Set<string>();
    const inbox = new PostgresInbox(postgresJs(), { scope: "client-js" });
    await expectExactlyOnce(
      inbox.handle(async (event, tx) => {
        await tx`insert into effects (event_id) values (${event.id})`;
        if (fails.delete(event.id)) throw new Error("fails once");
      }),
      (id) => fails.add(id),
      effects,
    );
  });

  it("one pg Client: deliveries take turns on the connection", async () => {
    const client = await pgClient();
    const fails = new Set<string>();
    const inbox = new PostgresInbox(client, { scope: "client-pg" });
    const onEvent = inbox.handle(async (event, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
      if (fails.delete(event.id)) throw new Error("fails once");
    });
    await expectExactlyOnce(onEvent, (id) => fails.add(id), effects);
    // Concurrent deliveries on one connection do not share a transaction.
    const ids = Array.from({ length: 10 }, () => `evt_${randomUUID()}`);
    await Promise.all(ids.flatMap((id) => [onEvent({ id } as WebhookEvent), onEvent({ id } as WebhookEvent)]));
    for (const id of ids) expect(await effects(id)).toBe(1);
  });

  it("Drizzle (recipe): tx is Drizzle's transaction", async () => {
    const fails = new Set<string>();
    const inbox = new PostgresInbox(drizzleInbox(pgPool()), { scope: "client-drizzle" });
    await expectExactlyOnce(
      inbox.handle(async (event, tx) => {
        await tx.execute(drizzleSql`insert into effects (event_id) values (${event.id})`);
        if (fails.delete(event.id)) throw new Error("fails once");
      }),
      (id) => fails.add(id),
      effects,
    );
  });

  it("Kysely (recipe): tx is Kysely's Transaction", async () => {
    const fails = new Set<string>();
    const { client } = kyselyInbox(pgPool());
    const inbox = new PostgresInbox(client, { scope: "client-kysely" });
    await expectExactlyOnce(
      inbox.handle(async (event, tx) => {
        await tx.insertInto("effects").values({ event_id: event.id, note: null }).execute();
        if (fails.delete(event.id)) throw new Error("fails once");
      }),
      (id) => fails.add(id),
      effects,
    );
  });

  it("a handler that swallows a failed statement does not get a 2xx: the transaction did not commit", async () => {
    const clients = {
      pg: pgPool(),
      "postgres.js": postgresJs(),
      Kysely: kyselyInbox(pgPool()).client,
    };
    for (const [name, client] of Object.entries(clients)) {
      const inbox = new PostgresInbox(client as pg.Pool, { scope: `swallow-${name.replace(".", "")}` });
      const id = `evt_${randomUUID()}`;
      const onEvent = inbox.handle(async (event, tx) => {
        const query = (text: string) =>
          typeof tx === "function"
            ? (tx as unknown as postgres.Sql).unsafe(text)
            : "query" in tx
              ? tx.query(text)
              : (tx as never as Kysely<never>).executeQuery(CompiledQuery.raw(text));
        await query(`insert into effects (event_id) values ('${event.id}')`);
        await Promise.resolve(query("select * from no_such_table")).catch(() => {});
      });
      await expect(onEvent({ id } as WebhookEvent), name).rejects.toThrow();
      expect(await effects(id), name).toBe(0);
      expect(await inboxRows(id), name).toBe(0);
    }
  });

  it("a createRouter() router whose handlers take (event, tx) is a valid fn", async () => {
    const inbox = new PostgresInbox(pgPool(), { scope: "router" });
    const router = createRouter<[tx: pg.PoolClient]>().on("flag.updated", async (event, tx) => {
      await tx.query("insert into effects (event_id, note) values ($1, $2)", [event.id, event.data.flag]);
    });
    const send = await receiver("Express", inbox.handle(router));
    const id = `evt_${randomUUID()}`;
    expect((await send(body(id))).status).toBe(204);
    expect((await send(body(id))).headers["webhook-duplicate"]).toBe("true");
    const rows = await admin.query("select note from effects where event_id = $1", [id]);
    expect(rows.rows).toEqual([{ note: "new-checkout" }]);
  });

  it("prune() deletes this scope's expired ids, in batches, and no other scope's", async () => {
    const inbox = new PostgresInbox(pgPool(), { scope: "prune", retention: 1 });
    const other = new PostgresInbox(pgPool(), { scope: "prune-other", retention: 1 });
    const kept = new PostgresInbox(pgPool(), { scope: "prune", retention: "1h" });
    const handle = inbox.handle(() => {});
    await handle({ id: "old-1" } as WebhookEvent);
    await handle({ id: "old-2" } as WebhookEvent);
    await other.handle(() => {})({ id: "old-1" } as WebhookEvent);
    await kept.handle(() => {})({ id: "young" } as WebhookEvent);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await inbox.prune()).toBe(2);
    expect(await inbox.prune()).toBe(0);
    const left = await admin.query(
      "select scope, id from flag_webhooks_inbox where scope like 'prune%' order by scope",
    );
    expect(left.rows).toEqual([
      { scope: "prune", id: "young" },
      { scope: "prune-other", id: "old-1" },
    ]);
    // Past its retention an id is forgotten: a replay that old runs again (maxAge refuses it first).
    const runs: string[] = [];
    await other.handle((event) => void runs.push(event.id))({ id: "old-1" } as WebhookEvent);
    expect(runs).toEqual(["old-1"]);
  });

  it("two endpoints (scopes) sharing the database each handle the same event id", async () => {
    const a = new PostgresInbox(pgPool(), { scope: "endpoint-a" });
    const b = new PostgresInbox(pgPool(), { scope: "endpoint-b" });
    const id = `evt_${randomUUID()}`;
    const write = async (event: WebhookEvent, tx: pg.PoolClient) => {
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
    };
    expect(await a.handle(write)({ id } as WebhookEvent)).toBeUndefined();
    expect(await b.handle(write)({ id } as WebhookEvent)).toBeUndefined();
    expect(await a.handle(write)({ id } as WebhookEvent)).toMatchObject({ status: 204 });
    expect(await effects(id)).toBe(2);
  });

  it("migrate() is idempotent, also run by several processes at once, and takes a schema-qualified table", async () => {
    await admin.query("create schema if not exists app");
    const inboxes = Array.from({ length: 4 }, () => new PostgresInbox(pgPool(2), { scope: "m", table: "app.inbox" }));
    await Promise.all(inboxes.map((inbox) => inbox.migrate()));
    await (inboxes[0] as PostgresInbox).migrate();
    const onEvent = (inboxes[0] as PostgresInbox).handle(() => {});
    await onEvent({ id: "m-1" } as WebhookEvent);
    expect((await admin.query("select id from app.inbox")).rows).toEqual([{ id: "m-1" }]);
  });
});

/** A pg Client that counts its statements: pg sends one at a time, so one each is one round trip. */
let statements = 0;
class CountingClient extends pg.Client {
  override query(...args: unknown[]): never {
    statements++;
    return (super.query as (...a: unknown[]) => never)(...args);
  }
}

/** How many statements the CountingClients sent while `run` ran. */
async function count(run: () => Promise<unknown>): Promise<number> {
  const before = statements;
  await run();
  return statements - before;
}

describe.skipIf(skip !== undefined)("PostgresInbox round trips, counted on the real clients", () => {
  beforeAll(database);

  it("pg Pool: a new delivery costs 2 round trips besides the handler's; a duplicate costs 1, a read outside any transaction", async () => {
    const pool = new pg.Pool({ connectionString: server?.url, Client: CountingClient });
    pools.push(pool);
    const inbox = new PostgresInbox(pool, { scope: "round-trips-pg" });
    const onEvent = inbox.handle(async (event, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
    });
    await onEvent({ id: "warm-up" } as WebhookEvent); // the pool's first connection
    const id = `evt_${randomUUID()}`;
    // begin and the claim of the id in one, [the handler's one insert], the check and commit in one
    expect(await count(() => onEvent({ id } as WebhookEvent))).toBe(2 + 1);
    // the read of an id this inbox handled, which finds it committed
    expect(await count(() => onEvent({ id } as WebhookEvent))).toBe(1);
    // As a DedupeStore: claim and complete, 1 each; a duplicate's claim, 1.
    expect(await count(() => inbox.claim(`claim-${id}`, 1000))).toBe(1);
    expect(await count(() => inbox.complete(`claim-${id}`, 1000))).toBe(1);
    expect(await count(() => inbox.claim(`claim-${id}`, 1000))).toBe(1);
  });

  it("postgres.js: 4 and 1, its COMMIT being its own (counted by its debug hook)", async () => {
    let sent = 0;
    const sql = postgres(server?.url as string, { max: 2, onnotice: () => {}, debug: () => void sent++ });
    pools.push(sql);
    const inbox = new PostgresInbox(sql, { scope: "round-trips-js" });
    const onEvent = inbox.handle(async (event, tx) => {
      await tx`insert into effects (event_id) values (${event.id})`;
    });
    await onEvent({ id: "warm-up" } as WebhookEvent);
    const id = `evt_${randomUUID()}`;
    let before = sent;
    await onEvent({ id } as WebhookEvent);
    // begin, claim, [the handler's insert], the check, commit; then a copy's read
    expect(sent - before).toBe(4 + 1);
    before = sent;
    expect(await onEvent({ id } as WebhookEvent)).toMatchObject({ status: 204 });
    expect(sent - before).toBe(1);
  });

  it("an InboxClient (Kysely recipe): 4 and 1 (the check is a statement of its own before its COMMIT)", async () => {
    const pool = new pg.Pool({ connectionString: server?.url, Client: CountingClient });
    pools.push(pool);
    const inbox = new PostgresInbox(kyselyInbox(pool).client, { scope: "round-trips-kysely" });
    const onEvent = inbox.handle(async (event, tx) => {
      await tx.insertInto("effects").values({ event_id: event.id, note: null }).execute();
    });
    await onEvent({ id: "warm-up" } as WebhookEvent);
    const id = `evt_${randomUUID()}`;
    expect(await count(() => onEvent({ id } as WebhookEvent))).toBe(4 + 1);
    expect(await count(() => onEvent({ id } as WebhookEvent))).toBe(1);
  });
});

describe.skipIf(skip !== undefined)("examples/postgres/server.ts, run as its README says", () => {
  let child: ChildProcess | undefined;
  afterAll(() => {
    if (child && child.exitCode === null && child.signalCode === null) process.kill(child.pid as number, "SIGKILL");
  });

  it("writes each event's audit row once, answers a duplicate 204, refuses a forged delivery", async () => {
    const { url } = await database();
    const started = spawn(process.execPath, ["--import", "tsx", "examples/postgres/server.ts"], {
      cwd: join(import.meta.dirname, "../../.."),
      env: {
        ...process.env,
        TSX_TSCONFIG_PATH: "tsconfig.test.json",
        DATABASE_URL: url,
        WEBHOOK_SECRET: SECRET,
        PORT: "0",
      },
      stdio: "pipe",
    });
    child = started;
    let output = "";
    started.stdout?.on("data", (chunk: Buffer) => {
      output += chunk;
    });
    started.stderr?.on("data", (chunk: Buffer) => {
      output += chunk;
    });
    const port = await new Promise<string>((resolve, reject) => {
      const timer = setInterval(() => {
        const match = output.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\/webhooks/);
        if (match) {
          clearInterval(timer);
          resolve(match[1] as string);
        }
      }, 50);
      started.once("exit", (code) => {
        clearInterval(timer);
        reject(new Error(`the example exited with ${code}:\n${output}`));
      });
    });
    const id = `evt_${randomUUID()}`;
    const text = body(id);
    const send = (signature: string) =>
      fetch(`http://127.0.0.1:${port}/webhooks`, {
        method: "POST",
        headers: { "service-signature": signature },
        body: text,
      });
    expect((await send(await sign(text))).status).toBe(204);
    const again = await send(await sign(text));
    expect([again.status, again.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
    expect((await send("0".repeat(64))).status).toBe(401);
    const rows = await admin.query("select type, flag from audit where event_id = $1", [id]);
    expect(rows.rows).toEqual([{ type: "flag.updated", flag: "new-checkout" }]);
  }, 40_000);
});

// ---------------------------------------------------------------------------------------------
// The inbox's options and clients by shape, and its edges. Each inbox is made inside its test:
// Stryker counts only what a test itself runs as covering a mutant.

const newId = () => `evt_${randomUUID()}`;
/** What a promise settled with, without throwing: `{ value }` or `{ error }`, or "pending" after `ms`. */
async function settled<T>(promise: Promise<T>, ms = 3000): Promise<{ value: T } | { error: unknown } | "pending"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise.then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      ),
      new Promise<"pending">((resolve) => {
        timer = setTimeout(() => resolve("pending"), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

describe("PostgresInbox options and clients, by shape", () => {
  const nowhere = new pg.Pool({ connectionString: "postgres://127.0.0.1:1/none" });
  afterAll(() => nowhere.end());

  it("null options, a table that is not a string, each duration option and handle() without a function: a TypeError naming it", () => {
    for (const options of [null, undefined, "scope"]) {
      expect(() => new PostgresInbox(nowhere, options as never)).toThrow(
        new TypeError('flag-webhooks: PostgresInbox needs options with a "scope"'),
      );
    }
    expect(() => new PostgresInbox(nowhere, { scope: "s", table: ["inbox"] as never })).toThrow(/option "table"/);
    expect(() => new PostgresInbox(nowhere, { scope: "s", lockTimeout: "soon" })).toThrow(/option "lockTimeout"/);
    expect(() => new PostgresInbox(nowhere, { scope: "s", timeout: "soon" })).toThrow(/option "timeout"/);
    // The clock keep-then-work schedules by: a value that is not one would fail only at the first keep().
    expect(() => new PostgresInbox(nowhere, { scope: "s", now: 1_700_000_000_000 as never })).toThrow(
      new TypeError('flag-webhooks: option "now" must be a function'),
    );
    const inbox = new PostgresInbox(nowhere, { scope: "s" });
    for (const fn of [undefined, "handler", {}]) {
      expect(() => inbox.handle(fn as never)).toThrow(new TypeError("flag-webhooks: inbox.handle() takes a function"));
    }
  });

  it("refuses objects that only look partly like a client, at construction rather than at the first delivery", () => {
    const noop = () => {};
    const nearMisses = [
      null,
      { totalCount: 0 }, // a pg Pool's count, without connect()
      { totalCount: 0, query: noop },
      Object.assign(() => {}, { begin: noop }), // postgres.js has begin AND unsafe
      Object.assign(() => {}, { unsafe: noop }),
      { begin: noop, unsafe: noop }, // postgres.js's sql is a function
      { transaction: noop }, // an InboxClient has query too
      { query: noop }, // a pg Client has connect too
      { connect: noop },
    ];
    for (const client of nearMisses) {
      expect(() => new PostgresInbox(client as never, { scope: "s" })).toThrow(
        new TypeError(
          "flag-webhooks: PostgresInbox needs a pg Pool or Client, a postgres.js sql, or an InboxClient (transaction, query)",
        ),
      );
    }
  });
});

describe.skipIf(skip !== undefined)("PostgresInbox edges", () => {
  beforeAll(database);

  it("migrate() creates the table's (scope, expires_at) index and keep-then-work's due and parked indexes, named after the table", async () => {
    await admin.query("create schema if not exists app");
    await new PostgresInbox(pgPool(2), { scope: "m", table: "app.indexed" }).migrate();
    const { rows } = await admin.query(
      "select indexname, indexdef from pg_indexes where schemaname = 'app' and tablename = 'indexed' order by indexname",
    );
    expect(rows.map((row) => row.indexname)).toEqual([
      "indexed_due",
      "indexed_expires",
      "indexed_parked",
      "indexed_pkey",
    ]);
    expect(rows[0].indexdef).toMatch(/\(scope, next_at\) WHERE \(state = ANY/);
    expect(rows[1].indexdef).toMatch(/\(scope, expires_at\)$/);
  });

  it("release() by another instance never frees a claim that instance lost when its lease lapsed", async () => {
    const first = new PostgresInbox(pgPool(2), { scope: "tokens" });
    const second = new PostgresInbox(pgPool(2), { scope: "tokens" });
    const id = newId();
    expect(await first.claim(id, 50)).toBe("claimed");
    await sleep(80);
    expect(await second.claim(id, 10_000)).toBe("claimed");
    await first.release(id);
    expect(await first.claim(id, 10_000)).toBe("in_flight");
    await second.release(id);
    expect(await first.claim(id, 10_000)).toBe("claimed");
  });

  it("one pg Client: a new delivery costs 2 round trips besides the handler's, a duplicate 1, an id claimed through the DedupeStore interface 2 (409)", async () => {
    const client = await pgClient(CountingClient);
    const inbox = new PostgresInbox(client, { scope: "round-trips-client" });
    const onEvent = inbox.handle(async (event, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
    });
    const id = newId();
    expect(await count(() => onEvent({ id } as WebhookEvent))).toBe(2 + 1);
    expect(await count(() => onEvent({ id } as WebhookEvent))).toBe(1);
    const claimed = newId();
    expect(await inbox.claim(claimed, 10_000)).toBe("claimed");
    let refused: unknown;
    expect(
      await count(() =>
        onEvent({ id: claimed } as WebhookEvent).catch((error: unknown) => {
          refused = error;
        }),
      ),
    ).toBe(2);
    expect(refused).toMatchObject({
      code: "delivery_in_progress",
      message: `event ${claimed} is being handled by another delivery; retry later`,
    });
  });

  /** Two pools behind one InboxClient: statements outside a transaction on one, transactions on the other. */
  function split(outside: pg.Pool, inside: pg.Pool) {
    let last: Promise<unknown> = Promise.resolve();
    const failures: unknown[] = [];
    const client: InboxClient<pg.PoolClient> = {
      transaction(fn) {
        const run = (async () => {
          const tx = await inside.connect();
          try {
            await tx.query("begin");
            const value = await fn(tx);
            await tx.query("commit");
            return value;
          } catch (error) {
            await tx.query("rollback").catch(() => {});
            throw error;
          } finally {
            tx.release();
          }
        })();
        last = run.catch((error: unknown) => void failures.push(error));
        return run;
      },
      query: async (text, params, tx) => (await (tx ?? outside).query(text, [...params])).rows,
    };
    return { client, failures, finished: () => last };
  }

  it("a transaction that cannot start within timeout (its pool exhausted): 503 at timeout, and the handler never runs, even once it starts", async () => {
    const full = pgPool(1);
    const held = await full.connect();
    const { client, failures, finished } = split(pgPool(2), full);
    const inbox = new PostgresInbox(client, { scope: "pool-full", lockTimeout: 100, timeout: 300 });
    let ran = false;
    const id = newId();
    try {
      const outcome = await settled(
        inbox.handle(() => {
          ran = true;
        })({ id } as WebhookEvent),
      );
      expect(outcome).toMatchObject({
        error: {
          code: "store_unavailable",
          message: "the Postgres inbox is unavailable; retry later",
          cause: { message: "Postgres did not answer within 300 ms" },
        },
      });
    } finally {
      held.release();
    }
    // The transaction got its connection at last: it rolls back, and the handler never runs.
    await finished();
    expect(failures).toEqual([expect.objectContaining({ message: "flag-webhooks: rolled back by the inbox" })]);
    expect(ran).toBe(false);
    expect(await inboxRows(id)).toBe(0);
  });

  it("a claim that does not answer within timeout: 503, the transaction rolled back, the handler never runs", async () => {
    const { client, failures, finished } = split(pgPool(2), pgPool(2));
    // The claim is the statement that runs in the transaction before the handler: it never answers.
    const hanging: InboxClient<pg.PoolClient> = {
      transaction: client.transaction,
      query: (text, params, tx) =>
        tx && / claim as \(/.test(text) ? new Promise(() => {}) : client.query(text, params, tx),
    };
    const inbox = new PostgresInbox(hanging, { scope: "claim-hangs", lockTimeout: 100, timeout: 300 });
    let ran = false;
    const id = newId();
    const outcome = await settled(
      inbox.handle(() => {
        ran = true;
      })({ id } as WebhookEvent),
    );
    expect(outcome).toMatchObject({
      error: { code: "store_unavailable", cause: { message: "Postgres did not answer within 300 ms" } },
    });
    await finished();
    expect(failures).toEqual([expect.objectContaining({ message: "flag-webhooks: rolled back by the inbox" })]);
    expect(ran).toBe(false);
    expect(await inboxRows(id)).toBe(0);
  });

  it("a handler slower than timeout is the user's: no 503, its writes commit", async () => {
    const inbox = new PostgresInbox(pgPool(), { scope: "slow-handler", lockTimeout: 100, timeout: 300 });
    const id = newId();
    const outcome = await settled(
      inbox.handle(async (event, tx) => {
        await sleep(450);
        await tx.query("insert into effects (event_id) values ($1)", [event.id]);
        return { status: 200 };
      })({ id } as WebhookEvent),
    );
    expect(outcome).toEqual({ value: { status: 200 } });
    expect(await effects(id)).toBe(1);
    expect(await inboxRows(id)).toBe(1);
  });

  it("a copy that waited for another transaction which committed a DedupeStore claim of the id: 409, not a duplicate", async () => {
    const inbox = new PostgresInbox(pgPool(), { scope: "taken-claim", lockTimeout: 1000, timeout: 2000 });
    const id = newId();
    const other = await admin.connect();
    let ran = false;
    try {
      await other.query("begin");
      await other.query(
        `insert into flag_webhooks_inbox (scope, id, state, token, expires_at)
         values ('taken-claim', $1, 'claimed', 'another-instance', now() + interval '1 hour')`,
        [id],
      );
      const pending = settled(
        inbox.handle(() => {
          ran = true;
        })({ id } as WebhookEvent),
      );
      // The delivery's insert waits for the other transaction's row lock.
      await expect
        .poll(async () => (await admin.query("select count(*)::int as n from pg_locks where not granted")).rows[0].n)
        .toBeGreaterThan(0);
      await other.query("commit");
      expect(await pending).toMatchObject({ error: { code: "delivery_in_progress" } });
    } finally {
      other.release();
    }
    expect(ran).toBe(false);
  });

  it("a copy whose id another transaction committed while it waited looks again: that look failing or hanging is a 503, the row gone too", async () => {
    // The claim finds no row (the other's commit is not in its snapshot), so the inbox reads the
    // id's state again in a statement of its own, bounded by timeout like every step.
    const refused = new Error("the read of the id's state failed");
    const looks = {
      fails: () => Promise.reject(refused),
      hangs: () => new Promise<never>(() => {}),
      // Pruned or released between the two statements: nothing to call a duplicate or in progress,
      // and the claim kept nothing (as for a row a trigger drops): 503, retry later.
      gone: async (scope: string, id: string) => {
        await admin.query("delete from flag_webhooks_inbox where scope = $1 and id = $2", [scope, id]);
        return [];
      },
    };
    const outcomes: Record<string, unknown> = {};
    for (const [name, look] of Object.entries(looks)) {
      const { client } = split(pgPool(2), pgPool(2));
      const scope = `second-look-${name}`;
      const id = newId();
      const looking: InboxClient<pg.PoolClient> = {
        transaction: client.transaction,
        query: (text, params, tx) =>
          !tx && /^select state from/.test(text) ? look(scope, id) : client.query(text, params, tx),
      };
      const inbox = new PostgresInbox(looking, { scope, lockTimeout: 1000, timeout: 1200 });
      const other = await admin.connect();
      try {
        await other.query("begin");
        await other.query(
          `insert into flag_webhooks_inbox (scope, id, state, expires_at) values ($1, $2, 'done', now() + interval '1 hour')`,
          [scope, id],
        );
        const pending = settled(inbox.handle(() => {})({ id } as WebhookEvent));
        await expect
          .poll(async () => (await admin.query("select count(*)::int as n from pg_locks where not granted")).rows[0].n)
          .toBeGreaterThan(0);
        await other.query("commit");
        outcomes[name] = await pending;
      } finally {
        other.release();
      }
    }
    expect(outcomes).toMatchObject({
      fails: { error: { code: "store_unavailable", cause: refused } },
      hangs: { error: { code: "store_unavailable", cause: { message: "Postgres did not answer within 1200 ms" } } },
      gone: { error: { code: "store_unavailable", message: expect.stringMatching(/kept nothing/) } },
    });
  });

  it("a claim whose row another transaction committed while it waited answers in_flight", async () => {
    const inbox = new PostgresInbox(pgPool(), { scope: "late-row" });
    const id = newId();
    const other = await admin.connect();
    try {
      await other.query("begin");
      await other.query(
        `insert into flag_webhooks_inbox (scope, id, state, token, expires_at)
         values ('late-row', $1, 'claimed', 'another-instance', now() + interval '1 hour')`,
        [id],
      );
      const pending = settled(inbox.claim(id, 10_000));
      await expect
        .poll(async () => (await admin.query("select count(*)::int as n from pg_locks where not granted")).rows[0].n)
        .toBeGreaterThan(0);
      await other.query("commit");
      expect(await pending).toEqual({ value: "in_flight" });
    } finally {
      other.release();
    }
  });

  it("prune() goes on past one batch of 10,000 until every expired id of the scope is gone", async () => {
    await admin.query(
      `insert into flag_webhooks_inbox (scope, id, state, expires_at)
       select 'prune-many', 'id-' || n, 'done', now() - interval '1 minute' from generate_series(1, 12345) n`,
    );
    expect(await new PostgresInbox(pgPool(2), { scope: "prune-many" }).prune()).toBe(12_345);
    const left = await admin.query("select count(*)::int as n from flag_webhooks_inbox where scope = 'prune-many'");
    expect(left.rows[0].n).toBe(0);
  });

  it("called outside a receiver (a queue worker), it commits when the handler resolves, whatever it returns, and rolls back when it throws", async () => {
    const inbox = new PostgresInbox(pgPool(), { scope: "replies" });
    for (const reply of [undefined, { status: 503 }, { statusCode: 500 }, new Response(null, { status: 503 })]) {
      const id = newId();
      const outcome = await settled(
        inbox.handle(async (event, tx) => {
          await tx.query("insert into effects (event_id) values ($1)", [event.id]);
          return reply;
        })({ id } as WebhookEvent),
      );
      expect(outcome).toEqual({ value: reply });
      expect([await effects(id), await inboxRows(id)]).toEqual([1, 1]);
    }
    const id = newId();
    const thrown = new Error("no");
    const outcome = await settled(
      inbox.handle(async (event, tx) => {
        await tx.query("insert into effects (event_id) values ($1)", [event.id]);
        throw thrown;
      })({ id } as WebhookEvent),
    );
    expect(outcome).toEqual({ error: thrown });
    expect([await effects(id), await inboxRows(id)]).toEqual([0, 0]);
  });

  it("a handler's own failed statement is the handler's error (500); a connection Postgres refuses is the store's (503)", async () => {
    const inbox = new PostgresInbox(pgPool(), { scope: "handler-errors" });
    // 22008 (a date out of range) holds "08" but is no connection exception (08…); 42P01 no table.
    for (const [statement, code] of [
      ["select make_date(2020, 13, 1)", "22008"],
      ["select * from no_such_table", "42P01"],
    ] as const) {
      const outcome = await settled(
        inbox.handle(async (_event, tx) => {
          await tx.query(statement);
        })({ id: newId() } as WebhookEvent),
      );
      expect(outcome, statement).toMatchObject({ error: { code } });
      expect((outcome as { error: unknown }).error, statement).not.toHaveProperty("status");
    }
    // A role over its connection limit: too_many_connections (53300), the store's failure.
    const role = `limited_${randomUUID().replaceAll("-", "")}`;
    await admin.query(`create role ${role} login connection limit 0`);
    try {
      const url = new URL(server?.url as string);
      url.username = role;
      const outcome = await settled(
        inbox.handle(async () => {
          const client = new pg.Client({ connectionString: url.toString() });
          await client.connect();
          await client.end();
        })({ id: newId() } as WebhookEvent),
      );
      expect(outcome).toMatchObject({ error: { code: "store_unavailable", cause: { code: "53300" } } });
    } finally {
      await admin.query(`drop role ${role}`);
    }
    // A value that is no Error at all is the handler's, as thrown.
    expect(
      await settled(
        inbox.handle(() => {
          throw null;
        })({ id: newId() } as WebhookEvent),
      ),
    ).toEqual({ error: null });
  });

  it("an InboxClient that fails with no error value at all still answers 503 store_unavailable", async () => {
    const { client } = split(pgPool(2), pgPool(2));
    const broken: InboxClient<pg.PoolClient> = { query: client.query, transaction: () => Promise.reject(undefined) };
    const outcome = await settled(
      new PostgresInbox(broken, { scope: "no-error" }).handle(() => {})({ id: newId() } as WebhookEvent),
    );
    expect(outcome).toMatchObject({ error: { code: "store_unavailable" } });
  });

  it("pg: a handler that swallows a failed statement gets 503, and why: the transaction did not commit", async () => {
    const inbox = new PostgresInbox(pgPool(), { scope: "swallowed-pg" });
    const outcome = await settled(
      inbox.handle(async (_event, tx) => {
        await tx.query("select * from no_such_table").catch(() => {});
      })({ id: newId() } as WebhookEvent),
    );
    // The check before COMMIT fails in an aborted transaction, so COMMIT is never sent.
    expect(outcome).toMatchObject({ error: { code: "store_unavailable", cause: { code: "25P02" } } });
  });

  it("an InboxClient whose handler commits through tx gets 503, and why: the inbox's transaction was ended by the handler", async () => {
    const { client } = split(pgPool(2), pgPool(2));
    const inbox = new PostgresInbox(client, { scope: "ended-by-handler" });
    const outcome = await settled(
      inbox.handle(async (_event, tx) => {
        await tx.query("commit");
      })({ id: newId() } as WebhookEvent),
    );
    expect(outcome).toMatchObject({
      error: {
        code: "store_unavailable",
        cause: { message: expect.stringContaining("the inbox's transaction was ended by the handler") },
      },
    });
  });

  it("pg Pool: a connection lost under the handler is the store's failure (503), whatever the handler throws, and is not reused", async () => {
    const pool = pgPool(1);
    const inbox = new PostgresInbox(pool, { scope: "lost-connection" });
    const pids: number[] = [];
    const lose = inbox.handle(async (_event, tx) => {
      const { rows } = await tx.query("select pg_backend_pid() as pid");
      pids.push(rows[0].pid);
      // Postgres goes away while the handler awaits something else: the lent client reports it.
      await admin.query("select pg_terminate_backend($1)", [rows[0].pid]);
      await sleep(50);
      throw new Error("the handler's own failure, after the connection was lost");
    });
    const outcome = await settled(lose({ id: newId() } as WebhookEvent));
    expect(outcome).toMatchObject({
      error: {
        code: "store_unavailable",
        cause: { message: "the handler's own failure, after the connection was lost" },
      },
    });
    // A handler that returns after its connection was lost: nothing commits, 503.
    const returned = inbox.handle(async (_event, tx) => {
      const { rows } = await tx.query("select pg_backend_pid() as pid");
      await admin.query("select pg_terminate_backend($1)", [rows[0].pid]);
      await sleep(50);
      return { status: 204 };
    });
    expect(await settled(returned({ id: newId() } as WebhookEvent))).toMatchObject({
      error: { code: "store_unavailable" },
    });
    const next = inbox.handle(async (_event, tx) => {
      pids.push((await tx.query("select pg_backend_pid() as pid")).rows[0].pid);
    });
    expect(await settled(next({ id: newId() } as WebhookEvent))).toEqual({ value: undefined });
    expect(pids).toHaveLength(2);
    expect(pids[1]).not.toBe(pids[0]);
  });

  it("pg Pool: a healthy connection goes back to the pool and is reused, with no listener left behind", async () => {
    const inbox = new PostgresInbox(pgPool(1), { scope: "reused" });
    const seen: { pid: number; listeners: number }[] = [];
    const onEvent = inbox.handle(async (_event, tx) => {
      const { rows } = await tx.query("select pg_backend_pid() as pid");
      seen.push({ pid: rows[0].pid, listeners: tx.listenerCount("error") });
    });
    for (let i = 0; i < 3; i++) await onEvent({ id: newId() } as WebhookEvent);
    expect(new Set(seen.map((s) => s.pid)).size).toBe(1);
    expect(new Set(seen.map((s) => s.listeners)).size).toBe(1);
  });

  it("leaves no timer running once a delivery is answered, new or duplicate (a process with nothing else to do can exit)", async () => {
    // One pg Client: a Pool would start idle timers of its own.
    const client = await pgClient();
    const onEvent = new PostgresInbox(client, { scope: "timers" }).handle(() => {});
    const timers = () => process.getActiveResourcesInfo().filter((resource) => resource === "Timeout").length;
    await onEvent({ id: newId() } as WebhookEvent);
    const id = newId();
    const before = timers();
    expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
    // At most as many: another test's timer may have ended meanwhile; none of the inbox's is left.
    expect(timers()).toBeLessThanOrEqual(before);
    expect(await onEvent({ id } as WebhookEvent)).toMatchObject({ status: 204 });
    expect(timers()).toBeLessThanOrEqual(before);
  });
});
