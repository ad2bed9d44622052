import Database from "better-sqlite3";
import fc from "fast-check";
import { type KnownWebhookEvent, MemoryOrderStore, type WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { FlagMirror, shuffledCopy, signedRequest } from "flag-webhooks/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { propertyRuns } from "../../support/order.js";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { databaseFile } from "../../support/sqlite.js";

// The property of ordered delivery (docs/order.md) under the inputs a sender may sign that the
// other property tests never make: ids that compare oddly (case, accents, characters past U+FFFF
// against those from U+E000, spaces, `#`), one instant written in several valid forms (`Z` and
// `+00:00`, `.5` and `.500`), and flag, environment and path names such as `__proto__`,
// `constructor`, the empty string and a path of 2,000 characters. Delivered shuffled with copies,
// all at once, to a fetch receiver on a MemoryOrderStore and to the Postgres and SQLite inboxes:
// what the handlers saw gives the in-order state.

const availability = postgresAvailability();
const SECRET = "whsec-order-hostile-test";
let database: TestDatabase | undefined;
let pool: pg.Pool | undefined;
const file = new Database(databaseFile());
file.pragma("journal_mode = wal");
file.pragma("synchronous = normal");
beforeAll(async () => {
  if (!availability.available) return;
  database = await testDatabase();
  pool = new pg.Pool({ connectionString: database.url, max: 8 });
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await database?.close();
  file.close();
});

const NAMES = ["__proto__", "constructor", "toString", "", "on"];
const PATHS = [...NAMES, "rollout.percent", "p".repeat(2000)];
// Distinct ids whose code point order differs from their UTF-16 order, case order, or length order.
const IDS = ["evt_a", "evt_B", "evt_b", "évt", "evt_\u{1F600}", "evt_\uE000", "evt_\uFFFF", "evt a", "#1", "evt_aa"];

/** One instant of whole seconds `at` written in one of its valid forms. */
function written(at: number, form: number): string {
  const iso = new Date(at).toISOString().slice(0, 19);
  return [`${iso}Z`, `${iso}+00:00`, `${iso}.000Z`, `${iso}.0+00:00`][form % 4] as string;
}

const op = fc.record({
  flag: fc.constantFrom(...NAMES),
  kind: fc.constantFrom("flag.updated", "flag.updated", "flag.updated", "flag.deleted", "flag.created"),
  environment: fc.constantFrom("__proto__", "production", ""),
  paths: fc.subarray(PATHS, { minLength: 1, maxLength: 3 }),
  to: fc.integer({ min: 0, max: 100 }),
  gap: fc.constantFrom(0, 0, 0, 1),
  form: fc.nat(3),
});

const histories = fc.record({
  ops: fc.array(op, { minLength: 1, maxLength: IDS.length }),
  ids: fc.shuffledSubarray(IDS, { minLength: IDS.length, maxLength: IDS.length }),
  seed: fc.integer(),
});

type History = typeof histories extends fc.Arbitrary<infer Value> ? Value : never;

function eventsOf(history: History): KnownWebhookEvent[] {
  let at = Date.parse("2026-11-21T09:00:00Z");
  return history.ops.map((item, index): KnownWebhookEvent => {
    at += item.gap * 1000;
    const base = { id: history.ids[index] as string, createdAt: written(at, item.form), environment: item.environment };
    if (item.kind !== "flag.updated") return { ...base, type: item.kind, data: { flag: item.flag } };
    const changes = item.paths.map((path) => ({ path, from: null, to: item.to }));
    return {
      ...base,
      type: "flag.updated",
      data: { flag: item.flag, changes, actor: { type: "user", email: "a@b.c" } },
    };
  });
}

/**
 * The order the rule must give, worked out here on its own rather than by the library's
 * positionOf/inOrder: the instant as a number, then the id by code point.
 */
function byInstantThenId(events: KnownWebhookEvent[]): KnownWebhookEvent[] {
  const points = (id: string) => Array.from(id, (char) => char.codePointAt(0) as number);
  const ids = (a: string, b: string) => {
    const [x, y] = [points(a), points(b)];
    for (let i = 0; i < Math.min(x.length, y.length); i++)
      if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number);
    return x.length - y.length;
  };
  return [...events].sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt) || ids(a.id, b.id));
}

type Receiver = () => Promise<(event: KnownWebhookEvent) => Promise<Response>>;
let scopes = 0;
let seen: WebhookEvent[] = [];
const record = async (event: WebhookEvent) => void seen.push(event);
const sender = (handle: (request: Request) => Promise<Response>) => async (event: KnownWebhookEvent) =>
  handle(await signedRequest({ secret: SECRET, event }));

const receivers: { name: string; available: boolean; make: Receiver; runs: number }[] = [
  {
    name: "MemoryOrderStore",
    available: true,
    runs: 300,
    make: async () =>
      sender(webhookHandler({ secret: SECRET, order: { store: new MemoryOrderStore() }, onEvent: record })),
  },
  {
    name: "SqliteInbox",
    available: true,
    runs: 150,
    make: async () => {
      const inbox = new SqliteInbox(file, { scope: `hostile-${++scopes}`, order: true });
      await inbox.migrate();
      return sender(webhookHandler({ secret: SECRET, onEvent: inbox.handle(record) }));
    },
  },
  {
    name: "PostgresInbox",
    available: availability.available,
    runs: 100,
    make: async () => {
      const inbox = new PostgresInbox(pool as pg.Pool, { scope: `hostile-${++scopes}`, order: true });
      await inbox.migrate();
      return sender(webhookHandler({ secret: SECRET, onEvent: inbox.handle(record) }));
    },
  },
];

describe.each(receivers)("$name: odd ids, instant forms and names", ({ available, make, runs }) => {
  it.runIf(available)(
    "gives the in-order state for any history delivered shuffled, with copies, all at once",
    async () => {
      await fc.assert(
        fc.asyncProperty(histories, async (history) => {
          const events = eventsOf(history);
          const expected = new FlagMirror();
          for (const event of byInstantThenId(events)) expected.apply(event);
          seen = [];
          const send = await make();
          const delivered = shuffledCopy(events, { seed: history.seed, duplicates: 0.4 });
          const answers = await Promise.all(delivered.map(send));
          expect(answers.map((answer) => answer.status)).toEqual(delivered.map(() => 204));
          const actual = new FlagMirror();
          for (const event of seen) actual.apply(event);
          expect(actual.snapshot()).toEqual(expected.snapshot());
        }),
        { numRuns: propertyRuns(runs) },
      );
    },
    120_000,
  );
});
