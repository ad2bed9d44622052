import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { run } from "../support/cli.js";
import { databaseFile } from "../support/sqlite.js";

// Attack on what `flag-webhooks inbox` prints of the fields a sender or a handler sets (ids, type,
// flag, last error), in the table, show and --json: the marks that reorder text beyond the
// embeddings and isolates already escaped, lone surrogates, ids the escapes make alike, and ids
// that look like options. src/cli/terminal-text.ts says what a terminal acts on is written as an
// escape "so a person sees what was there", and that an id copied from the table names its event.

const SCOPE = "fields";
/** The bidi marks terminal-text.ts leaves: LEFT-TO-RIGHT, RIGHT-TO-LEFT and ARABIC LETTER MARK. */
const MARKS = /[\u200e\u200f\u061c]/gu;
const REPLACEMENT = /\ufffd/gu;

describe("flag-webhooks inbox: fields with bidi marks, lone surrogates and escape look-alikes", () => {
  let file = "";
  let db: Database.Database;
  const marked = "evt_marks\u200e\u200f\u061cid";
  const literal = "evt_esc\\x1bid";
  const escaped = "evt_esc\u001bid";
  const optionLike = ["--json", "-x"];
  const args = (...rest: string[]) => ["inbox", ...rest, "--scope", SCOPE, "--db", file];

  beforeAll(async () => {
    file = databaseFile("fields.db");
    db = new Database(file);
    const inbox = new SqliteInbox(db, { scope: SCOPE });
    await inbox.migrate();
    const keep = inbox.enqueue();
    await keep(createEvent("flag.updated", { id: marked, data: { flag: "f\u200fmarked" } }));
    // A type and a flag with a lone surrogate (parked by the worker: the type no longer parses).
    const lone = createEvent("flag.updated", { id: "evt_lone", data: { flag: "f\ud800lone" } }) as { type: string };
    lone.type = "flag.updated\ud800";
    await keep(lone as never);
    for (const id of [literal, escaped, ...optionLike]) await keep(createEvent("flag.updated", { id }));
  });
  afterAll(() => db?.close());

  // Broken: the rule escapes the embeddings and isolates (U+202A–U+202E, U+2066–U+2069) but not
  // the three marks, which reorder the neutral characters around them as well: the table printed
  // 4 (the id's three, the flag's one), show 8 (the fields and the body), list --json 7. A fix
  // adds U+200E, U+200F and U+061C to the one rule (CONTROLS), for every output at once.
  it.fails("the table, show and --json print no bidi mark raw", async () => {
    const table = (await run(args("list"))).stdout;
    const shown = (await run(args("show", marked))).stdout;
    const json = (await run([...args("list"), "--json"])).stdout;
    const raw = {
      table: table.match(MARKS)?.length ?? 0,
      show: shown.match(MARKS)?.length ?? 0,
      json: json.match(MARKS)?.length ?? 0,
    };
    console.log(`bidi marks printed raw: ${JSON.stringify(raw)}`);
    expect(raw).toEqual({ table: 0, show: 0, json: 0 });
  });

  // Broken: a lone surrogate in the type or the flag reaches the terminal as U+FFFD (stdout is
  // UTF-8), so the table and show print a character that was not there, where --json writes
  // \ud800 (JSON.stringify's well-formed output): 4 in the table, 4 in show (fields and body). A
  // fix writes a lone surrogate as its \uXXXX escape, as the controls are (readBack() reads that
  // form already).
  it.fails("a lone surrogate in a type or a flag is printed as its escape, not as U+FFFD", async () => {
    const table = (await run(args("list"))).stdout;
    const shown = (await run(args("show", "evt_lone"))).stdout;
    const json = (await run(args("show", "evt_lone", "--json"))).stdout;
    expect(json).toContain("\\ud800");
    const replaced = { table: table.match(REPLACEMENT)?.length ?? 0, show: shown.match(REPLACEMENT)?.length ?? 0 };
    console.log(`lone surrogates printed as U+FFFD: ${JSON.stringify(replaced)}`);
    expect(replaced).toEqual({ table: 0, show: 0 });
  });

  // Broken: an id holding the four characters \x1b and one holding ESC are listed alike
  // (evt_esc\x1bid, twice), and show, replay and purge given that text take the first as typed:
  // the second is named by no text the table prints (1 of the 2). A fix makes printing one to
  // one: a backslash the sender sent is escaped too (\\), and readBack() reads it back.
  it.fails("two ids are never listed alike: a backslash-x escape sent as text and the control it stands for", async () => {
    const table = (await run(args("list"))).stdout;
    const printed = table
      .split("\n")
      .filter((line) => line.startsWith("evt_esc"))
      .map((line) => line.split(/\s{2,}/)[0]);
    console.log(`listed: ${JSON.stringify(printed)}`);
    expect(new Set(printed).size).toBe(2);
  });

  it("held: an id that looks like an option is named after --, by show and purge", async () => {
    for (const id of optionLike) {
      expect((await run(args("show", id))).code).toBe(2);
      const shown = await run(["inbox", "show", "--scope", SCOPE, "--db", file, "--", id]);
      expect(shown.code).toBe(0);
      expect(shown.stdout).toContain(`id:           ${id}\n`);
    }
    const purged = await run(["inbox", "purge", "--scope", SCOPE, "--db", file, "--", "-x"]);
    expect(purged.stdout).toBe("Purged 1 event.\n");
  });

  it("held: a scope, a limit or a time with controls is refused, and echoed escaped if at all", async () => {
    for (const extra of [
      ["list", "--scope", "s\u001b[2J"],
      ["list", "--scope", SCOPE, "--limit", "1\u001b[2J"],
      ["replay", "--scope", SCOPE, "--since", "x\u001b[2J"],
      ["list", "--scope", SCOPE, "--state", "x\u001b[2J"],
    ]) {
      const result = await run(["inbox", ...extra, "--db", file]);
      expect(result.code).toBe(2);
      expect(result.stderr).not.toMatch(/[\p{Cc}](?<!\n)/u);
    }
  });
});
