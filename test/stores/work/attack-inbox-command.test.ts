import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { run } from "../../support/cli.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on `flag-webhooks inbox list|show|replay|purge` with hostile input, run as bin.ts runs it
// (main() in-process) against a real SQLite file: connection strings that hold a password in a
// form the command does not read as a postgres:// URL, ids the stores hash or a table cuts, ids
// shaped like SQL, and the controls a sender or a handler's error carries, in the table and in
// --json.

const SCOPE = "attack";
const PASSWORD = "s3cr3t-Pw-91";
/** C1 controls (U+009B is a terminal's CSI) and the marks that reorder text: a terminal acts on them. */
const C1_OR_BIDI = /[\u0080-\u009f\u202a-\u202e\u2066-\u2069]/u;

describe("flag-webhooks inbox: a connection string with a password, in a form it does not take", () => {
  // Broken: each of these is answered "no such SQLite file: <the string>", password and all, on
  // stderr (a CI log, a terminal someone shares). 4 of 4 forms printed it: SQLAlchemy's
  // postgresql+psycopg2://, a JDBC URL, a postgres:// URL with a leading space (a pasted
  // variable), and libpq's key=value form. The postgres:// forms it takes (an unreachable host, a
  // password with an unescaped # or /, an invalid port) printed it 0 of 5 times: those hold.
  const forms = [
    `postgresql+psycopg2://app:${PASSWORD}@127.0.0.1:1/app`,
    `jdbc:postgresql://127.0.0.1:1/app?user=app&password=${PASSWORD}`,
    ` postgres://app:${PASSWORD}@127.0.0.1:1/app`,
    `host=127.0.0.1 port=1 user=app password=${PASSWORD} dbname=app`,
  ];
  it("never prints the password, whatever the form (4 of 4 printed it)", async () => {
    const printed: string[] = [];
    for (const db of forms) {
      const result = await run(["inbox", "list", "--scope", SCOPE], { env: { FLAG_WEBHOOKS_DB: db } });
      expect(result.code).toBe(1);
      if (`${result.stdout}${result.stderr}`.includes(PASSWORD)) printed.push(db);
    }
    expect(printed).toEqual([]);
  });

  it("the postgres:// forms it takes never print it, even when the URL does not parse", async () => {
    for (const db of [
      `postgres://app:${PASSWORD}@127.0.0.1:1/app`,
      `postgres://app:${PASSWORD}#x@127.0.0.1:1/app`,
      `postgres://app:${PASSWORD}/x@127.0.0.1:1/app`,
      `postgres://app:${PASSWORD}@127.0.0.1:99999/app`,
      `postgres://127.0.0.1:1/app?password=${PASSWORD}`,
    ]) {
      const result = await run(["inbox", "list", "--scope", SCOPE, "--db", db]);
      expect(result.code).toBe(1);
      expect(`${result.stdout}${result.stderr}`).not.toContain(PASSWORD);
    }
  });
});

describe("flag-webhooks inbox: hostile ids, types and errors", () => {
  let file = "";
  let db: Database.Database;
  const longId = `evt_${"x".repeat(60)}`;
  const nulId = "evt_nul\u0000id";
  const hugeId = `evt_${"y".repeat(2000)}`;
  const controlId = "evt_\u009b31m\u202eid";
  const sqlId = "' or 1=1 --";
  const ids = [longId, nulId, controlId, sqlId, hugeId];
  const args = (...rest: string[]) => ["inbox", ...rest, "--scope", SCOPE, "--db", file];

  beforeAll(async () => {
    file = databaseFile("command.db");
    db = new Database(file);
    db.pragma("journal_mode = wal");
    const inbox = new SqliteInbox(db, { scope: SCOPE });
    await inbox.migrate();
    for (const id of ids) await inbox.enqueue()(createEvent("flag.updated", { id, data: { flag: "f\u009b2J" } }));
    // A handler's error as long as a stack with an API's whole answer, ending in a C1 CSI.
    const worker = inbox.work(
      () => {
        throw new Error(`${"e".repeat(100_000)}\u009b2J`);
      },
      { interval: false, retries: [] },
    );
    await worker.drain();
    await worker.close();
  });
  afterAll(() => db?.close());

  /** The ID cells of the table `list` prints. */
  const listedIds = async () => {
    const listed = await run(args("list"));
    expect(listed.code).toBe(0);
    return listed.stdout
      .trimEnd()
      .split("\n")
      .slice(1)
      .map((line) => line.split(/\s{2,}/)[0] as string);
  };

  // Broken: the page says kept(), replay and purge take "either that listed id or the event's
  // own", but the table cuts its ID column at 40 characters, and a hashed id is 65 (`#` and 64
  // hex digits): 3 of the 5 ids listed (both hashed ones, and a 64-character id) are printed with
  // an ellipsis, and `show` with what was printed answers "no event …"; a 4th, an id with a C1
  // control, is printed escaped (rightly), and its escape is not taken back either. 4 of 5 could
  // not be shown; only --json gives them whole.
  it("every id the table lists can be shown with what it printed (4 of 5 could not)", async () => {
    const missing: string[] = [];
    for (const id of await listedIds()) {
      const shown = await run(args("show", id));
      if (shown.code !== 0) missing.push(id);
    }
    expect(missing).toEqual([]);
  });

  // Broken: the table writes every control as its escape, but --json writes what JSON.stringify
  // leaves as it is: U+0000–U+001F are escaped, the C1 controls (U+009B, a CSI) and the bidi marks
  // (U+202E) are not, so `list --json` at a terminal sends them: 3 fields of each event (the id,
  // the flag in the body, the last error) in list --json, and show --json likewise. Written as
  // \u009b the JSON would parse to the same values.
  it("list --json and show --json print no C1 control or bidi mark (both printed them)", async () => {
    const listed = await run([...args("list"), "--json"]);
    const shown = await run([...args("show", controlId), "--json"]);
    expect(listed.code).toBe(0);
    expect(shown.code).toBe(0);
    expect(JSON.parse(listed.stdout).map((event: { id: string }) => event.id)).toContain(controlId);
    expect({ list: C1_OR_BIDI.test(listed.stdout), show: C1_OR_BIDI.test(shown.stdout) }).toEqual({
      list: false,
      show: false,
    });
  });

  // Broken, a small one: an id that is not there is echoed as typed in "no event …", controls and
  // all (here ESC ] 0; … BEL, which sets the terminal's title), where the table escapes them.
  it("an id that is not there is not echoed with its controls", async () => {
    const result = await run(args("show", "evt_\u001b]0;owned\u0007"));
    expect(result.code).toBe(1);
    expect(result.stderr).not.toMatch(/[\p{Cc}](?<!\n)/u);
  });

  it("held: the table shows no control, and a 100 kB last error as one cut line", async () => {
    const listed = await run(args("list"));
    expect(listed.stdout).not.toMatch(/(?!\n)[\p{Cc}\u202a-\u202e\u2066-\u2069]/u);
    expect(listed.stdout.trimEnd().split("\n")).toHaveLength(1 + ids.length);
    expect(Math.max(...listed.stdout.split("\n").map((line) => line.length))).toBeLessThan(250);
    const shown = await run(args("show", sqlId));
    // The worker keeps 1,000 characters of it.
    expect(shown.stdout).toMatch(/last error: {3}e{999}…\n/);
  });

  it("held: an id shaped like SQL is one id: show finds it, purge deletes it alone", async () => {
    expect((await run(args("show", sqlId))).code).toBe(0);
    expect((await run(args("show", "%"))).code).toBe(1);
    expect((await run(args("replay", "' or ''='"))).stdout).toBe(
      "Replayed 0 events: due now, with all their attempts.\n",
    );
    const purged = await run(args("purge", sqlId));
    expect(purged.stdout).toBe("Purged 1 event.\n");
    const left = db.prepare("select count(*) as n from flag_webhooks_inbox where scope = ?").get(SCOPE) as {
      n: number;
    };
    expect(left.n).toBe(ids.length - 1);
  });
});
