import { existsSync } from "node:fs";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadPeer } from "../../src/cli/inbox-db.js";
import { expectOneLineError, run, SECRET } from "../support/cli.js";
import { type TestDatabase, testDatabase } from "../support/postgres-database.js";
import { postgresAvailability } from "../support/postgres-server.js";
import { databaseFile } from "../support/sqlite.js";

// `flag-webhooks inbox list|show|replay|purge`, run as bin.ts runs it (main() in-process), against
// a real SQLite file (better-sqlite3) and a real Postgres: the events a keep-then-work inbox kept,
// as a person reads them, replayed and purged only as asked.

const availability = postgresAvailability();

/** One database the command is pointed at, and an inbox of the test's own on it. */
interface Backend {
  /** What `--db` takes. */
  db: string;
  inbox(scope: string): PostgresInbox | SqliteInbox;
  /** The handler's write, through the attempt's transaction. */
  effect(tx: unknown, id: string): Promise<void> | void;
  effects(id: string): Promise<number>;
}

function sqliteBackend(): () => Backend {
  let file = "";
  let db: Database.Database | undefined;
  beforeAll(() => {
    file = databaseFile("cli.db");
    db = new Database(file);
    // WAL: the command's connection reads while this one's worker writes.
    db.pragma("journal_mode = wal");
    db.exec("create table effects (event_id text not null)");
  });
  afterAll(() => db?.close());
  return () => ({
    db: file,
    inbox: (scope) => new SqliteInbox(db as Database.Database, { scope }),
    effect: (tx, id) => void (tx as Database.Database).prepare("insert into effects (event_id) values (?)").run(id),
    effects: async (id) =>
      (
        (db as Database.Database).prepare("select count(*) as n from effects where event_id = ?").get(id) as {
          n: number;
        }
      ).n,
  });
}

function postgresBackend(): () => Backend {
  let database: TestDatabase | undefined;
  let pool: pg.Pool | undefined;
  beforeAll(async () => {
    if (!availability.available) return;
    database = await testDatabase();
    pool = new pg.Pool({ connectionString: database.url, max: 4 });
    await pool.query("create table effects (event_id text not null)");
  }, 60_000);
  afterAll(async () => {
    await pool?.end();
    await database?.close();
  });
  return () => ({
    db: (database as TestDatabase).url,
    inbox: (scope) => new PostgresInbox(pool as pg.Pool, { scope }),
    effect: async (tx, id) =>
      void (await (tx as pg.PoolClient).query("insert into effects (event_id) values ($1)", [id])),
    effects: async (id) =>
      Number((await (pool as pg.Pool).query("select count(*) from effects where event_id = $1", [id])).rows[0].count),
  });
}

const backends = [
  { name: "a SQLite file", available: true, backend: sqliteBackend() },
  { name: "Postgres", available: availability.available, backend: postgresBackend() },
];

/**
 * A scope with one event parked (its one attempt failed), one pending (failed once, next in an
 * hour), and one done; the handler writes an effect row per successful run.
 */
async function keptEvents(backend: Backend, scope: string) {
  const inbox = backend.inbox(scope);
  await inbox.migrate();
  const keep = inbox.enqueue();
  const poison = createEvent("flag.updated", { id: `${scope}-poison`, data: { flag: "new-checkout" } });
  await keep(poison);
  const noRetry = inbox.work(
    () => {
      throw new Error("TypeError: cannot read properties of undefined (reading 'plan')");
    },
    { interval: false, retries: [] },
  );
  await noRetry.drain();
  await noRetry.close();
  const flaky = createEvent("flag.updated", { id: `${scope}-flaky`, data: { flag: "dark-mode" } });
  const fine = createEvent("flag.updated", { id: `${scope}-fine` });
  await keep(flaky);
  await keep(fine);
  const worker = inbox.work(
    async (event: WebhookEvent, tx) => {
      if (event.id === flaky.id) throw new Error("billing API answered 503\nService Unavailable");
      await backend.effect(tx, event.id);
    },
    { interval: false, retries: ["1h"], jitter: 0 },
  );
  await worker.drain();
  await worker.close();
  return { inbox, poison, flaky, fine };
}

const args = (backend: Backend, scope: string, ...rest: string[]) => [
  "inbox",
  ...rest,
  "--db",
  backend.db,
  "--scope",
  scope,
];

describe.each(backends)("flag-webhooks inbox on $name", ({ available, backend: current }) => {
  it.runIf(available)(
    "list prints the pending and parked events as a table, oldest first; done ones are not listed",
    async () => {
      const backend = current();
      const { poison, flaky } = await keptEvents(backend, "list");
      const listed = await run(args(backend, "list", "list"));
      expect([listed.code, listed.stderr]).toEqual([0, ""]);
      const lines = listed.stdout.trimEnd().split("\n");
      expect(lines).toHaveLength(3);
      expect(lines[0]).toMatch(/^ID +STATE +TYPE +FLAG +ATTEMPTS +LAST ERROR +NEXT ATTEMPT$/);
      expect(lines[1]).toMatch(
        new RegExp(
          `^${poison.id} +parked +flag\\.updated +new-checkout +1 +TypeError: cannot read properties of undefined… +-$`,
        ),
      );
      // The error on one line, the next attempt relative to now.
      expect(lines[2]).toMatch(
        new RegExp(
          `^${flaky.id} +pending +flag\\.updated +dark-mode +1 +billing API answered 503 Service Unavailable +in 1h$`,
        ),
      );
      // Columns line up: each starts where its title does.
      const at = (line: string, text: string) => line.indexOf(text);
      expect(at(lines[1] as string, "flag.updated")).toBe(at(lines[0] as string, "TYPE"));
      expect(at(lines[2] as string, "in 1h")).toBe(at(lines[0] as string, "NEXT ATTEMPT"));

      const parked = await run(args(backend, "list", "list", "--state", "parked"));
      expect(parked.stdout.trimEnd().split("\n").slice(1)).toEqual([
        expect.stringMatching(new RegExp(`^${poison.id} `)),
      ]);
      const one = await run(args(backend, "list", "list", "--limit", "1"));
      expect(one.stdout.trimEnd().split("\n").slice(1)).toEqual([
        expect.stringMatching(new RegExp(`^${poison.id} `)),
        "(the first 1 pending or parked events: --limit <n> to see more)",
      ]);
      const json = await run(args(backend, "list", "list", "--json"));
      expect(
        (JSON.parse(json.stdout) as { id: string; attempts: number }[]).map(({ id, attempts }) => [id, attempts]),
      ).toEqual([
        [poison.id, 1],
        [flaky.id, 1],
      ]);
      expect((await run(args(backend, "nothing-here", "list"))).stdout).toBe(
        'No pending or parked events in scope "nothing-here".\n',
      );
    },
  );

  it.runIf(available)("show prints every field of one event and its body as received, indented", async () => {
    const backend = current();
    const { flaky, fine } = await keptEvents(backend, "show");
    const shown = await run(args(backend, "show", "show", flaky.id));
    expect([shown.code, shown.stderr]).toEqual([0, ""]);
    const [fields, body] = shown.stdout.split("\n\n");
    expect(fields?.split("\n")).toEqual([
      `id:           ${flaky.id}`,
      "state:        pending",
      "type:         flag.updated",
      "flag:         dark-mode",
      `created at:   ${flaky.createdAt}`,
      expect.stringMatching(/^received at: {2}\d{4}-\d\d-\d\dT[\d:.]+Z$/),
      "attempts:     1",
      expect.stringMatching(/^next attempt: \d{4}-\d\d-\d\dT[\d:.]+Z \(in 1h\)$/),
      "last error:   billing API answered 503\nService Unavailable".split("\n")[0],
      "Service Unavailable",
    ]);
    expect(JSON.parse(body as string)).toEqual(JSON.parse(JSON.stringify(flaky)));
    expect(body).toBe(`${JSON.stringify(JSON.parse(JSON.stringify(flaky)), null, 2)}\n`);
    expect((await run(args(backend, "show", "show", fine.id))).stdout).toContain("state:        done\n");
    expectOneLineError(
      await run(args(backend, "show", "show", "evt_missing")),
      1,
      'no event evt_missing in scope "show"',
    );
  });

  it.runIf(available)(
    "replay <id> makes a parked event due with all its attempts; --wait follows a worker until it is done, once",
    async () => {
      const backend = current();
      const { inbox, poison, flaky } = await keptEvents(backend, "replay");
      const replayed = await run(args(backend, "replay", "replay", poison.id));
      expect(replayed).toEqual({
        code: 0,
        stdout: "Replayed 1 event: due now, with all their attempts.\n",
        stderr: "",
      });
      expect(await inbox.kept(poison.id)).toMatchObject({ state: "pending", attempts: 0 });
      // Parked again by a worker that still fails, then replayed --since (with the pending one) while
      // a fixed worker runs.
      const failing = inbox.work(() => Promise.reject(new Error("still broken")), { interval: false, retries: [] });
      await failing.drain();
      await failing.close();
      expect(await inbox.kept(poison.id)).toMatchObject({ state: "parked", lastError: "still broken" });
      const worker = inbox.work((event: WebhookEvent, tx) => backend.effect(tx, event.id), { interval: "20ms" });
      try {
        const since = new Date(Date.now() - 3_600_000).toISOString();
        const waited = await run(args(backend, "replay", "replay", "--since", since, "--wait", "--progress"));
        expect(waited.code).toBe(0);
        expect(waited.stdout).toBe(
          "Replayed 2 events: due now, with all their attempts.\nNo event is pending or running; 0 parked.\n",
        );
        // The progress line, on stderr only, ending with nothing left to run.
        expect(waited.stderr.trimEnd().split("\n").at(-1)).toBe(
          "waiting for the workers: 0 pending, 0 running, 0 parked",
        );
      } finally {
        await worker.close();
      }
      expect(await inbox.kept(poison.id)).toMatchObject({ state: "done" });
      expect(await inbox.kept(flaky.id)).toMatchObject({ state: "done" });
      expect([await backend.effects(poison.id), await backend.effects(flaky.id)]).toEqual([1, 1]);
      // A done event is never run again: replaying it replays nothing.
      expect((await run(args(backend, "replay", "replay", poison.id))).stdout).toBe(
        "Replayed 0 events: due now, with all their attempts.\n",
      );
    },
  );

  it.runIf(available)("purge deletes only what it is told, and says how many", async () => {
    const backend = current();
    const { inbox, poison, flaky, fine } = await keptEvents(backend, "purge");
    expectOneLineError(
      await run(args(backend, "purge", "purge")),
      2,
      "purge deletes only what it is told: pass event ids, or --state parked|pending|done",
      "inbox",
    );
    expectOneLineError(
      await run(args(backend, "purge", "purge", "--state", "all")),
      2,
      "--state must be parked, pending or done",
      "inbox",
    );
    expect(await inbox.counts()).toMatchObject({ pending: 1, parked: 1 });
    const before = await run(args(backend, "purge", "purge", "--state", "parked", "--before", "2000-01-01"));
    expect(before).toEqual({ code: 0, stdout: "Purged 0 events.\n", stderr: "" });
    expect(await run(args(backend, "purge", "purge", "--state", "parked"))).toEqual({
      code: 0,
      stdout: "Purged 1 event.\n",
      stderr: "",
    });
    expect(await inbox.kept(poison.id)).toBeUndefined();
    expect(await run(args(backend, "purge", "purge", flaky.id, fine.id))).toEqual({
      code: 0,
      stdout: "Purged 2 events.\n",
      stderr: "",
    });
    expect(await inbox.counts()).toEqual({ pending: 0, running: 0, parked: 0, oldestWaitingSince: null });
    // The done one, within its retention, keeps its id (a copy is still a duplicate) without its body.
    const shown = (await run(args(backend, "purge", "show", fine.id))).stdout;
    expect(shown).toContain("state:        done\n");
    expect(shown).toContain("\n\n(body purged: its id kept as done until prune())\n");
  });

  it.runIf(available)(
    "list and show print what the sender or a handler wrote, never a terminal's control sequence",
    async () => {
      const backend = current();
      const inbox = backend.inbox("controls");
      await inbox.migrate();
      // An error message carries text from elsewhere (an API's answer, a row): here one that would
      // clear the screen, set the window's title, colour the rest red (C0 and C1 forms) and turn
      // the text right to left; the id, type and flag, signed by the sender, carry escapes too.
      const hostile = "\x1b[2J\x1b]0;owned\x07\x9b31m\u202ereversed\x01\r";
      const event = createEvent("flag.updated", {
        id: `evt_\x1b[31m${"controls"}`,
        data: { flag: `flag\x1b[8m\u2066` },
      });
      const odd = { ...createEvent("flag.created"), id: "evt_odd-type", type: "x\x1b[1m.type" };
      await inbox.enqueue()(event);
      await inbox.enqueue()(odd as WebhookEvent);
      const worker = inbox.work(
        () => {
          throw new Error(`upstream said: ${hostile}`);
        },
        { interval: false, retries: [] },
      );
      await worker.drain();
      await worker.close();
      // C0 controls but the newline, DEL, C1 controls, and the marks that reorder text.
      const CONTROL = /(?!\n)[\p{Cc}\u202a-\u202e\u2066-\u2069]/u;
      const listed = await run(args(backend, "controls", "list"));
      expect(listed.code).toBe(0);
      expect(listed.stdout).not.toMatch(CONTROL);
      // One line per event, and every escape shown as one: a person sees what was there.
      const lines = listed.stdout.trimEnd().split("\n");
      expect(lines).toHaveLength(3);
      expect(listed.stdout).toContain("evt_\\x1b[31mcontrols");
      for (const id of [event.id, odd.id]) {
        const shown = await run(args(backend, "controls", "show", id));
        expect(shown.code).toBe(0);
        expect(shown.stdout).not.toMatch(CONTROL);
        expect(shown.stdout).toContain("upstream said: \\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\u202ereversed\\x01\\x0d");
      }
      // --json too: JSON.stringify escapes only U+0000–U+001F, so the C1 controls and the marks are
      // written \uXXXX by the command, and the JSON still parses back to what was kept.
      const json = await run([...args(backend, "controls", "list"), "--json"]);
      expect(json.stdout).not.toMatch(CONTROL);
      expect(json.stdout).toContain("\\u009b31m\\u202ereversed");
      expect(JSON.parse(json.stdout).map((kept: { lastError: string }) => kept.lastError)).toEqual([
        `upstream said: ${hostile}`,
        `upstream said: ${hostile}`,
      ]);
      const one = await run([...args(backend, "controls", "show", event.id), "--json"]);
      expect(one.stdout).not.toMatch(CONTROL);
      expect(JSON.parse(one.stdout).id).toBe(event.id);
      // The id as the table lists it, escapes and all, names the event for show, replay and purge.
      const listedId = "evt_\\x1b[31mcontrols";
      expect(listed.stdout).toContain(`\n${listedId}  `);
      expect((await run(args(backend, "controls", "show", listedId))).stdout).toContain(`id:           ${listedId}\n`);
      expect((await run(args(backend, "controls", "replay", listedId))).stdout).toBe(
        "Replayed 1 event: due now, with all their attempts.\n",
      );
      expect((await run(args(backend, "controls", "purge", listedId))).stdout).toBe("Purged 1 event.\n");
      expect(await inbox.kept(event.id)).toBeUndefined();
      // An id that is not there is echoed as the table writes it, not as typed.
      expectOneLineError(
        await run(args(backend, "controls", "show", "evt_\x1b]0;x\x07\x9b")),
        1,
        'no event evt_\\x1b]0;x\\x07\\x9b in scope "controls"',
      );
    },
  );

  it.runIf(available)("list prints every id whole, so that show takes what it printed", async () => {
    const backend = current();
    const inbox = backend.inbox("long-ids");
    await inbox.migrate();
    // 64 characters as sent, and one over 1 KiB that the stores keep as # and its SHA-256 (65).
    for (const id of [`evt_${"z".repeat(60)}`, `evt_${"w".repeat(1100)}`]) {
      await inbox.enqueue()(createEvent("flag.updated", { id }));
    }
    const listed = await run(args(backend, "long-ids", "list"));
    const listedIds = listed.stdout
      .trimEnd()
      .split("\n")
      .slice(1)
      .map((line) => line.split(" ")[0] as string);
    expect([...listedIds].sort()).toEqual([expect.stringMatching(/^#[0-9a-f]{64}$/), `evt_${"z".repeat(60)}`]);
    for (const id of listedIds) expect((await run(args(backend, "long-ids", "show", id))).code).toBe(0);
  });

  it.runIf(available)("show prints a body as received when re-indenting its JSON would change it", async () => {
    const backend = current();
    const inbox = backend.inbox("fidelity");
    await inbox.migrate();
    // A variation value past 2^53 and a key sent twice: JSON.parse then stringify would print
    // 12345678901234567000 and one key, not what the sender signed and the inbox kept.
    const event = createEvent("flag.updated", { id: "evt_big" });
    const body = JSON.stringify(event).replace('"data":{', '"data":{"limit":12345678901234567890,"limit":1,');
    const receive = webhookHandler({ secret: SECRET, onEvent: inbox.enqueue() });
    expect((await receive(await signedRequest({ secret: SECRET, body }))).status).toBe(202);
    const shown = await run(args(backend, "fidelity", "show", "evt_big"));
    expect(shown.code).toBe(0);
    expect(shown.stdout.split("\n\n")[1]).toBe(`${body}\n`);
    // A body that round-trips is still indented.
    await inbox.enqueue()(createEvent("flag.updated", { id: "evt_plain" }));
    expect((await run(args(backend, "fidelity", "show", "evt_plain"))).stdout).toContain('{\n  "id": "evt_plain",');
  });

  it.runIf(available)("a table that is not a migrated inbox's: one line that says so", async () => {
    const backend = current();
    const result = await run([...args(backend, "other", "list"), "--table", "effects"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^flag-webhooks: the (SQLite|Postgres) inbox: .*\(is this the inbox's table, migrated by this version's inbox\.migrate\(\)\?\)\n$/,
    );
  });
});

describe("flag-webhooks inbox, called wrongly or pointed at nothing", () => {
  it("prints its help, as a user reads it", async () => {
    const help = await run(["inbox", "--help"]);
    expect(help).toEqual(await run(["help", "inbox"]));
    expect(help.stdout).toBe(
      [
        "Looks at and acts on the events a keep-then-work inbox (inbox.enqueue() and inbox.work()) kept, in",
        "a Postgres database (a postgres:// URL, through the pg package) or a SQLite file (through",
        "better-sqlite3). list prints the pending and parked events as a table; show prints one event and",
        "its body; replay makes parked events due again, with all their attempts; purge deletes the events",
        "it is told to, and says how many. Nothing is deleted unless purge names an id or a --state.",
        "",
        "Usage:",
        "  flag-webhooks inbox <list|show|replay|purge> [id...] --db <url|file> --scope <scope> [options]",
        "",
        "Options:",
        "      --db <url|file>   A postgres:// URL or a SQLite file (default: $FLAG_WEBHOOKS_DB)",
        "      --scope <scope>   The inbox's scope, as the app passes it (required)",
        "      --table <table>   The inbox's table (default: flag_webhooks_inbox)",
        "      --state <state>   list: pending, parked or all (default: all); purge: the state to delete,",
        "                        parked, pending or done",
        "      --limit <n>       list: the most events to print (default: 100)",
        "      --since <time>    replay: every parked or pending event received since then (an ISO date, or a",
        '                        duration ago: "24h")',
        "      --all             replay: every parked or pending event",
        "      --before <time>   purge: only events received before then",
        "      --wait            replay: wait until no event is pending or running (a worker must run)",
        "      --progress        Print the progress line on stderr even when it is not a terminal",
        "      --json            list, show: print JSON instead of a table",
        "  -h, --help            Show this help for inbox",
        "",
        "Examples:",
        "  $ export FLAG_WEBHOOKS_DB=postgres://app@localhost/app",
        "  $ flag-webhooks inbox list --scope billing",
        "  $ flag-webhooks inbox show evt_01HZ... --scope billing",
        "  $ flag-webhooks inbox replay --since 24h --scope billing --wait",
        "  $ flag-webhooks inbox purge --state parked --before 2026-01-01 --scope billing --db ./inbox.db",
        "",
      ].join("\n"),
    );
  });

  it("refuses a missing action, database or scope, and an unknown action, before opening anything", async () => {
    expectOneLineError(await run(["inbox"]), 2, "missing what to do: list, show, replay or purge", "inbox");
    expectOneLineError(await run(["inbox", "lsit"]), 2, 'unknown action "lsit": list, show, replay or purge', "inbox");
    expectOneLineError(
      await run(["inbox", "list", "--scope", "s"]),
      2,
      "no database: pass --db <url|file> or set FLAG_WEBHOOKS_DB",
      "inbox",
    );
    expectOneLineError(
      await run(["inbox", "list"], { env: { FLAG_WEBHOOKS_DB: "x.db" } }),
      2,
      "missing --scope <scope>: the scope the app's inbox uses",
      "inbox",
    );
    expectOneLineError(
      await run(["inbox", "replay", "--db", "x.db", "--scope", "s"]),
      2,
      "replay takes event ids, or --since <time>, or --all (one of them)",
      "inbox",
    );
    expectOneLineError(
      await run(["inbox", "replay", "--since", "yesterday", "--db", "x.db", "--scope", "s"]),
      2,
      '--since must be an ISO date (2026-05-01T12:00Z) or a duration ago (24h), got "yesterday"',
      "inbox",
    );
  });

  it("an action typed as a connection string is not echoed; one with controls is shown escaped", async () => {
    for (const typed of ["postgres://app:hunter2pw@db.internal/prod", "host=db password=hunter2pw"]) {
      const refused = await run(["inbox", typed, "--scope", "s"]);
      expectOneLineError(
        refused,
        2,
        "unknown action (not shown: it may hold a password): list, show, replay or purge",
        "inbox",
      );
      expect(refused.stderr).not.toContain("hunter2pw");
    }
    expectOneLineError(
      await run(["inbox", "\u001b]0;owned\u0007list\u202e"]),
      2,
      'unknown action "\\x1b]0;owned\\x07list\\u202e": list, show, replay or purge',
      "inbox",
    );
  });

  it("a SQLite file that does not exist is not created", async () => {
    const file = `${databaseFile()}.missing`;
    expectOneLineError(
      await run(["inbox", "list", "--db", file, "--scope", "s"]),
      1,
      `no such SQLite file: ${file} (for Postgres, pass a postgres:// URL)`,
    );
    expect(existsSync(file)).toBe(false);
  });

  it("a connection string it does not read as a postgres:// URL is refused without being echoed", async () => {
    // libpq's key=value form: were it echoed as a missing file's name, its password would be printed.
    const result = await run(["inbox", "list", "--scope", "s"], {
      env: { FLAG_WEBHOOKS_DB: "host=127.0.0.1 user=app password=s3cr3t dbname=app" },
    });
    expectOneLineError(
      result,
      1,
      "the database given is neither a postgres:// URL nor an existing SQLite file (not shown: it may hold a password); pass a postgres:// URL or the path of a SQLite file",
    );
  });

  it("an unreachable Postgres: one line, and the URL's password is never printed", async () => {
    const result = await run(["inbox", "list", "--scope", "s"], {
      env: { FLAG_WEBHOOKS_DB: "postgres://app:s3cr%40t-pw@127.0.0.1:1/app" },
    });
    expectOneLineError(result, 1, "the Postgres inbox: connect ECONNREFUSED 127.0.0.1:1");
    expect(result.stderr).not.toMatch(/s3cr/);
  });

  it("a driver that is not installed is named, with the command that installs it", async () => {
    await expect(loadPeer("flag-webhooks-no-such-driver", "a Postgres inbox")).rejects.toThrow(
      "a Postgres inbox needs the flag-webhooks-no-such-driver package: npm install flag-webhooks-no-such-driver",
    );
  });
});
