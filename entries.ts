// The package's entry points, in one list: package.json (exports, typesVersions, bin, peers),
// tsconfig.test.json (paths), tsup.config.ts (the build), vitest.config.ts (the aliases that map
// `flag-webhooks/...` to src/ in tests), the size test (size.test.ts: the budgets) and the test
// support that bundles Workers from src/ are all made from it. To add an entry, add it here and run
// `npm run entries` (it rewrites the package.json and tsconfig.test.json fields);
// test/package/entries.test.ts fails, naming that command, while anything disagrees.
//
// Size budgets. Each figure is an application's bundle of the built entry (esbuild from dist/,
// minified, gzipped), its `external` packages aside. Every budget follows one rule:
//   budget = what it measured when last set + 5%, rounded up to the next multiple of 64 B
// (`budgetFor` below). When a change outgrows a budget on purpose, measure again
// (`npx tsup && npx vitest run size.test` prints each figure) and write the new
// `measured`; the budget follows. Each budget says what it protects: the cost a user pays.

/** A module users import: `flag-webhooks` itself or `flag-webhooks/<name>`. */
export interface Entry {
  /** The subpath users import ("." for `flag-webhooks` itself); also its files' name in dist/. */
  readonly name: string;
  /** Its source file, from the repository's root. */
  readonly source: string;
  /**
   * Its optional peer packages and the versions it supports: a user installs one only to use this
   * entry, and nothing else in the package ever loads it.
   */
  readonly peers?: Readonly<Record<string, string>>;
  /**
   * The packages it imports at run time, which a bundle must leave to the user's copy (each one of
   * its peers). All else it bundles is its own code: no other package, ever.
   */
  readonly external?: readonly string[];
  /** The runtime it needs: Web APIs only (the default: Node, Bun, Deno, Workers), or Node itself. */
  readonly platform?: "neutral" | "node";
  /** What its size budgets protect; or, for an entry that never reaches a user's bundle, why none. */
  readonly size: readonly Budget[] | { readonly unbudgeted: string };
}

/** A size budget: one bundle of an entry, measured as an application's bundler would make it. */
export interface Budget {
  /** The cost it keeps down, in the words of the user who pays it. */
  readonly protects: string;
  /** What is measured: the whole bundle, or what it adds to an app that already has the core. */
  readonly measure: "bundle" | "on top of the core";
  /** Only these exports, tree-shaken (an app that imports just them); all of them when absent. */
  readonly names?: readonly string[];
  /** Bytes gzipped when the budget was last set; the budget is `budgetFor(measured)`. */
  readonly measured: number;
  /** What the bytes it grew by bought, when a change raised `measured` on purpose: the reason, in the user's terms. */
  readonly grew?: string;
}

/** The command-line tool (package.json "bin"), built apart from the library: a Node executable. */
export interface Command {
  /** The command users run. */
  readonly name: string;
  /** Its source file, from the repository's root. */
  readonly source: string;
  /** Its file in dist/ (without `.js`). */
  readonly file: string;
}

/** Every module of the package, in the order the build lists them. */
export const entries: readonly Entry[] = [
  {
    name: ".",
    source: "src/index.ts",
    size: [
      {
        protects:
          "a server that only verifies deliveries pays for the signature, the event parser and the replay window, not the receiver",
        measure: "bundle",
        names: ["verifyEvent"],
        measured: 3276,
      },
      {
        protects:
          "an app pays once for the whole core (receiver, router, memory and Redis stores, and the memory and Redis order stores), whatever its host",
        measure: "bundle",
        measured: 7179,
        grew: "from 6470 B (6459 B on main before it): ordered delivery on Redis at one request more than dedupe, not two (the claim's script takes the flag's hold, the receiver pairing the two stores), and waiting for a held flag without a 10 ms poll (woken by a hold that ends in the process, a doubling pause for another instance's)",
      },
    ],
  },
  {
    name: "express",
    source: "src/adapters/express.ts",
    peers: { express: ">=4.17" },
    size: [
      {
        protects: "an Express app pays for the adapter on top of the core",
        measure: "on top of the core",
        measured: 6473,
        grew: "from 2684 B: the held answer (a 2xx on the response waits until the store has recorded the event, and reads as sent meanwhile), the settlement's one decision of handled, and per-claim tokens; then the held answer acting as Node's own (Grew by 460 B (9 %) for the held answer acting as Node's own: back-pressure and a bound on a held body (an unbounded one held 231 MB for four deliveries), and flushHeaders, writeHeader and setHeaders on a held head (which cut the connection, or let a 2xx out early).); then about 230 B on every adapter: the verified body kept for an onEvent that keeps events (enqueue()), and the secret check's hint when next build evaluates the module; then about 500 B moved here from the core: the rule of ordered delivery, which the core no longer exports, now counts on top of it (the whole bundle grew by about 20 B, the mark of a stale inbox reply); then 334 B (5.4 %) for the answer's watch as methods shared by every watched response, each finding its watch on it (a function made per answer and stored on the ServerResponse cost about 30 µs of CPU a request over HTTP: memory dedupe went from 0.79× to about 1.0× of the baseline's CPU per request), with their place among the response's watches (two receivers on one route, a wrapper between them)",
      },
    ],
  },
  {
    name: "koa",
    source: "src/adapters/koa.ts",
    peers: { koa: ">=2.13" },
    size: [
      {
        protects: "a Koa app pays for the adapter on top of the core",
        measure: "on top of the core",
        measured: 6444,
        grew: "from 2715 B: the held answer (a 2xx on the response waits until the store has recorded the event, and reads as sent meanwhile), the settlement's one decision of handled, and per-claim tokens; then +3.1 %: a 2xx that waits for nothing (a memory store's claim) is decided at once and never held; then the held answer acting as Node's own (Grew by 470 B (10 %) for the held answer, as the express entry's.); then about 230 B on every adapter: the verified body kept for an onEvent that keeps events (enqueue()), and the secret check's hint when next build evaluates the module; then about 500 B moved here from the core: the rule of ordered delivery, which the core no longer exports, now counts on top of it (the whole bundle grew by about 20 B, the mark of a stale inbox reply); then 371 B (6.1 %): the answer's watch takes the response's emit with its other methods as one object (no list, wrapper or close listener made per delivery: memory dedupe's added bytes per delivery 1,221 to 770), and an ordered delivery's paired claim may settle the delivery itself (a DynamoDB transaction ending the hold and marking the id done in one request)",
      },
    ],
  },
  {
    name: "fetch",
    source: "src/adapters/fetch.ts",
    size: [
      {
        protects: "a Worker, Deno or Bun server pays for the fetch adapter on top of the core",
        measure: "on top of the core",
        measured: 3872,
        grew: "from 2181 B: the settlement's one decision of handled, and the stores enlisted in it; then about 230 B on every adapter: the verified body kept for an onEvent that keeps events (enqueue()), and the secret check's hint when next build evaluates the module; then about 500 B moved here from the core: the rule of ordered delivery, which the core no longer exports, now counts on top of it (the whole bundle grew by about 20 B, the mark of a stale inbox reply)",
      },
    ],
  },
  {
    name: "fastify",
    source: "src/adapters/fastify.ts",
    peers: { fastify: ">=5" },
    size: [
      {
        protects: "a Fastify app pays for the plugin on top of the core",
        measure: "on top of the core",
        measured: 6643,
        grew: "from 2884 B: the held answer (a 2xx on the response waits until the store has recorded the event, and reads as sent meanwhile), the settlement's one decision of handled, and per-claim tokens; then the held answer acting as Node's own (Grew by 460 B (9 %) for the held answer, as the express entry's.); then about 230 B on every adapter: the verified body kept for an onEvent that keeps events (enqueue()), and the secret check's hint when next build evaluates the module; then about 500 B moved here from the core: the rule of ordered delivery, which the core no longer exports, now counts on top of it (the whole bundle grew by about 20 B, the mark of a stale inbox reply); then 379 B (6.1 %): as the koa entry's, the answer's watch as one object taken over the response's emit, and a paired claim that settles its delivery",
      },
    ],
  },
  {
    name: "hono",
    source: "src/adapters/hono.ts",
    peers: { hono: ">=4" },
    size: [
      {
        protects: "a Hono app pays for the middleware on top of the core",
        measure: "on top of the core",
        measured: 4080,
        grew: "from 2373 B: the settlement's one decision of handled, and the stores enlisted in it; then about 230 B on every adapter: the verified body kept for an onEvent that keeps events (enqueue()), and the secret check's hint when next build evaluates the module; then about 500 B moved here from the core: the rule of ordered delivery, which the core no longer exports, now counts on top of it (the whole bundle grew by about 20 B, the mark of a stale inbox reply)",
      },
    ],
  },
  {
    name: "lambda",
    source: "src/adapters/lambda.ts",
    size: [
      {
        protects: "a Lambda function pays for the handler on top of the core",
        measure: "on top of the core",
        measured: 4059,
        grew: "from 2372 B: the settlement's one decision of handled, and the stores enlisted in it; then about 230 B on every adapter: the verified body kept for an onEvent that keeps events (enqueue()), and the secret check's hint when next build evaluates the module; then about 500 B moved here from the core: the rule of ordered delivery, which the core no longer exports, now counts on top of it (the whole bundle grew by about 20 B, the mark of a stale inbox reply)",
      },
    ],
  },
  {
    name: "bullmq",
    source: "src/queues/bullmq.ts",
    peers: { bullmq: ">=5" },
    external: ["bullmq"],
    size: [
      {
        protects:
          "an app that hands events to BullMQ pays for the hand-off and what it takes from the core, BullMQ aside",
        measure: "bundle",
        measured: 3672,
      },
    ],
  },
  {
    name: "dynamodb",
    source: "src/stores/dynamodb.ts",
    peers: { "@aws-sdk/client-dynamodb": ">=3.400" },
    external: ["@aws-sdk/client-dynamodb"],
    size: [
      {
        protects: "a Lambda function with the DynamoDB store pays for the store and its table, the AWS SDK aside",
        measure: "bundle",
        names: ["DynamoDBDedupeStore", "dedupeTable"],
        measured: 2001,
        grew: "from 1850 B on main (1771 when set): 151 B (8 %) for the claim a DynamoDBOrderStore on the same client and table settles in its own TransactWriteItems (the id's done mark and the claim's deletion as writes it can send), which takes an ordered delivery from 4 requests to 3",
      },
      {
        protects:
          "a Lambda function that orders on DynamoDB pays for the order store and its waiting, the AWS SDK and the core's rule aside",
        measure: "bundle",
        names: ["DynamoDBOrderStore"],
        measured: 4101,
        grew: "from 2199 B: a flag whose positions outgrow DynamoDB's 400 KB item is kept in parts (written before the flag's item, read back in one BatchGetItem) instead of answered 503 for ever, and a held flag is taken over only after its hold was seen unchanged for a whole lease on the waiter's own clock, so clock skew between instances no longer lets two deliveries of a flag run at once; then 751 B (22 %) for ending a delivery in one TransactWriteItems with a DynamoDBDedupeStore on the same client and table (the done mark with the commit, the claim's deletion with the release; 3 requests a delivery, not 4), the fallback for an endpoint without transactions, and requests that meet a transaction under way (a hold refused so looks again, a transaction cancelled by a conflict is sent again)",
      },
    ],
  },
  {
    name: "cloudflare",
    source: "src/cloudflare.ts",
    size: [
      {
        protects: "a Worker pays for the Durable Object store and its object",
        measure: "bundle",
        names: ["DedupeObject", "DurableObjectDedupeStore"],
        measured: 1662,
      },
      {
        protects: "a Worker that orders on Durable Objects pays for the order store and its object",
        measure: "bundle",
        names: ["OrderObject", "DurableObjectOrderStore"],
        // 2,051 before: a hold bounded by its caller's wait (a Worker that gave up leaves no hold
        // taken for nobody) and positions split over several storage values past one value's
        // 2 MB, so a wide flag is not refused for ever.
        measured: 2507,
      },
      {
        protects:
          "a Worker that hands events to Cloudflare Queues pays for the hand-off, its consumer's event parser included",
        measure: "bundle",
        names: ["enqueueTo", "consumeEvents"],
        measured: 3748,
      },
    ],
  },
  {
    name: "postgres",
    source: "src/stores/postgres/index.ts",
    // Recognises a client by its shape: it imports neither package, so neither is external.
    peers: { pg: ">=8", postgres: ">=3.4" },
    size: [
      {
        protects:
          "an app with the Postgres inbox pays for its SQL, four kinds of client, the transaction and ordered delivery's rule, keep-then-work (its statements, the worker and the event parser it re-parses kept bodies with), no driver",
        measure: "bundle",
        // 4606 before the handler's own BEGIN/COMMIT/ROLLBACK through tx became savepoints: the
        // statement reader shared with SQLite (stores/nested-transactions.ts) and pg's and
        // postgres.js's tx (+2088 B); then keep-then-work (+5182 B); then the rule of ordered delivery (about 1.4 kB).
        measured: 17280,
        grew: "from 14588 B: group commit of enqueue() (deliveries that arrive while a COMMIT is in flight kept by the next, one failed batch kept again one by one), a copy of a handled id answered from one read outside any transaction, an ordered delivery's positions read and written by the claim and COMMIT statements (no round trip more), positions bounded by the retention, a committed transaction that sends no late ROLLBACK; then 1,105 B (6.8 %): purge() keeps a done id within its retention (its body dropped) so a copy stays a duplicate, a row a trigger drops answered 503, enqueue() keeping a lone delivery at once with no timer or turn where the driver is synchronous, and the paired claim's settling seam",
      },
    ],
  },
  {
    name: "sqlite",
    source: "src/stores/sqlite/index.ts",
    // Recognises a database by its shape: it imports neither package (node:sqlite, bun:sqlite, D1
    // and Durable Objects are built in), so neither is external.
    peers: { "better-sqlite3": ">=12", "@libsql/client": ">=0.18" },
    size: [
      {
        protects:
          "an app with the SQLite inbox pays for its SQL, the drivers it recognises, the transaction and ordered delivery's rule, keep-then-work (its statements, the worker and the event parser it re-parses kept bodies with), no driver",
        measure: "bundle",
        // 5061 before the handler's own BEGIN/COMMIT/ROLLBACK through tx became savepoints (the
        // statement reader shared with Postgres, the connection's and libSQL's tx, closed once the
        // transaction ended) and the handler deadline (+2312 B); then keep-then-work (+5306 B); then the rule of ordered delivery (about 1.4 kB).
        measured: 18762,
        grew: "from 15027 B: group commit of enqueue() and its one-step writes (BEGIN IMMEDIATE, the statement and COMMIT in one synchronous step, no savepoint where no handler runs), positions bounded by the retention and kept while the scope keeps events; then 1,273 B (7.8 %): as the postgres entry's, and libSQL's lock waits moved out of SQLite (BEGIN IMMEDIATE and a rollback journal's COMMIT tried with SQLite's wait at 0, again after pauses: a wait inside SQLite stopped the whole process); then 1,217 B (6.9 %): keepOn (a second connection of the inbox's own where a keep is one autocommitted upsert, its checks that it is another connection to the same file, and its keep and group paths), and the reader of a handler's transaction statements hardened (the inbox's savepoint refused however quoted, a statement's text handed to the driver as read, never read twice)",
      },
    ],
  },
  {
    name: "otel",
    source: "src/otel/index.ts",
    peers: { "@opentelemetry/api": "^1.7.0" },
    external: ["@opentelemetry/api"],
    size: [
      {
        protects:
          "an app with OpenTelemetry pays for spans and metrics (of deliveries, queued jobs and kept events' attempts), @opentelemetry/api aside",
        measure: "bundle",
        names: ["openTelemetry"],
        measured: 1878,
      },
      {
        protects: "an app that watches a keep-then-work inbox pays for its four gauges, not for spans",
        measure: "bundle",
        names: ["observeInbox"],
        measured: 702,
      },
    ],
  },
  {
    name: "testing",
    source: "src/testing/index.ts",
    size: { unbudgeted: "a test kit: it runs in the user's tests, never in what they deploy" },
  },
  {
    name: "emulator",
    source: "src/emulator/index.ts",
    platform: "node",
    size: { unbudgeted: "a local server for development, never in what a user deploys" },
  },
];

/** The `flag-webhooks` command. */
export const command: Command = { name: "flag-webhooks", source: "src/cli/bin.ts", file: "cli" };

/** The budget rule: what was measured + 5%, rounded up to the next multiple of 64 B. */
export function budgetFor(measured: number): number {
  // In whole numbers: 105/100 in floating point could push an exact multiple of 64 to the next one.
  return Math.ceil((measured * 105) / (100 * 64)) * 64;
}

/** An entry's size budgets: none for an unbudgeted one. */
export function budgetsOf(entry: Entry): readonly Budget[] {
  return "unbudgeted" in entry.size ? [] : entry.size;
}

/** The entry's files in dist/, without extension: `index` for the package itself, else its name. */
export function distName(entry: Entry): string {
  return entry.name === "." ? "index" : entry.name;
}

/** The specifier users import it by: `flag-webhooks` or `flag-webhooks/<name>`. */
export function specifier(entry: Entry): string {
  return entry.name === "." ? "flag-webhooks" : `flag-webhooks/${entry.name}`;
}

/** The build's entry map (tsup `entry`): each entry's dist name to its source. */
export function buildEntries(): Record<string, string> {
  return Object.fromEntries(entries.map((entry) => [distName(entry), entry.source]));
}
