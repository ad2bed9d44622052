import { describe, expect, it } from "vitest";
import { Nesting, stepsOf } from "../../src/stores/nested-transactions.js";

// How the inboxes read a handler's statements for the ones that begin, commit or roll back a
// transaction (whatever their case, spacing and comments), and what those become: savepoints,
// or a refusal. The databases' side is tested on real Postgres and SQLite files beside the
// inboxes' tests.

/** What each statement of `text` does, in order; undefined when the text is sent as it is. */
const controls = (text: string, dialect: "postgres" | "sqlite" = "postgres") =>
  stepsOf(text, dialect)?.map((step) => step.control ?? (step.refused ? "refused" : "-"));

describe("stepsOf: the statements that begin, commit or roll back a transaction", () => {
  it.each([
    ["BEGIN", ["begin"]],
    ["  begin work ;", ["begin"]],
    ["Begin Transaction", ["begin"]],
    ["start transaction", ["begin"]],
    ["/* a comment */ -- and a line\n COMMIT", ["commit"]],
    ["/* nested /* comments */ still */ commit", ["commit"]],
    ["end", ["commit"]],
    ["END TRANSACTION", ["commit"]],
    ["commit work and no chain", ["commit"]],
    ["commit and chain", ["commit-chain"]],
    ["rollback", ["rollback"]],
    ["abort", ["rollback"]],
    ["ROLLBACK AND CHAIN", ["rollback-chain"]],
    ["begin; insert into t values ('a;b'); commit", ["begin", "-", "commit"]],
    ["begin isolation level serializable", ["refused"]],
    ["begin read only", ["refused"]],
    ["start transaction deferrable", ["refused"]],
    ["prepare transaction 'x'", ["refused"]],
    ["commit prepared 'x'", ["refused"]],
    ["rollback prepared 'x'", ["refused"]],
  ])("postgres: %j", (text, expected) => {
    expect(controls(text)).toEqual(expected);
  });

  it.each([
    "insert into t (note) values ('commit')",
    "insert into t (note) values (E'it\\'s; commit')",
    "select $$ begin; commit $$",
    "select $body$ rollback $body$",
    'select "commit" from t',
    "-- commit\nselect 1",
    "/* rollback */ select 1",
    "rollback to savepoint mine",
    "rollback work to mine",
    "savepoint mine",
    "release savepoint mine",
    "select case when true then 1 end",
    "prepare plan as select 1",
    "",
  ])("postgres, sent as it is: %j", (text) => {
    expect(controls(text)).toBeUndefined();
  });

  it.each([
    ["begin", ["begin"]],
    ["BEGIN DEFERRED", ["begin"]],
    ["begin immediate transaction", ["begin"]],
    ["begin exclusive", ["refused"]],
    ["commit transaction", ["commit"]],
    ["end", ["commit"]],
    ["rollback", ["rollback"]],
    ["commit; begin", ["commit", "begin"]],
    ["insert into `commit` values (1); commit", ["-", "commit"]],
  ])("sqlite: %j", (text, expected) => {
    expect(controls(text, "sqlite")).toEqual(expected);
  });

  it.each(["abort", "start transaction", "select [commit] from t", "/* /* */ select 1", "rollback to mine"])(
    "sqlite, sent as it is (or not a transaction statement there): %j",
    (text) => {
      expect(controls(text, "sqlite")).toBeUndefined();
    },
  );

  // A session may turn standard_conforming_strings off: Postgres then reads '\'' as a string
  // holding a quote, where the default reads a string holding a backslash and a second string.
  it.each([
    ["select '\\'' as a; commit; select 'x' --'", ["refused"]],
    ["select 'a\\'; commit; select '", ["refused"]],
    ["insert into t values ('C:\\dir'); commit", ["-", "commit"]],
    ["select E'\\''; commit", ["-", "commit"]],
    // In SJIS (or BIG5, GBK…), the bytes of "Á" sent as UTF-8 end in a lead byte that takes the backslash.
    ["select E'\u00c1\\'; commit; select 1 as x -- '", ["refused"]],
  ])("postgres, a backslash in a plain string: %j", (text, expected) => {
    expect(controls(text)).toEqual(expected);
  });

  it("postgres: the refusal of a text read two ways says how to write it", () => {
    expect(stepsOf("select '\\'' as a; commit; select 'x' --'", "postgres")?.[0]?.refused).toMatch(
      /standard_conforming_strings on and off; write E'…' for an escape/,
    );
  });

  // SQLite reads "a", [a], `a` and 'a' as the name a: the inbox's savepoint in any of them is its own.
  it.each([
    'ROLLBACK TO "flag_webhooks_inbox"',
    "rollback to savepoint [flag_webhooks_inbox]",
    "rollback transaction to `flag_webhooks_inbox`",
    "rollback to 'flag_webhooks_inbox'",
    'release "FLAG_WEBHOOKS_INBOX"',
    'release "flag_webhooks_""x"',
  ])("sqlite, the inbox's savepoint quoted: %j is refused", (text) => {
    expect(controls(text, "sqlite")).toEqual(["refused"]);
  });

  it.each(['rollback to "mine"', "release [flag webhooks]", "rollback to 'x_flag_webhooks_inbox'"])(
    "sqlite, a quoted savepoint of the app's: %j is sent as it is",
    (text) => {
      expect(controls(text, "sqlite")).toBeUndefined();
    },
  );
});

describe("Nesting: what the statements become", () => {
  const run = (nesting: Nesting, text: string) => {
    const sent: string[] = [];
    nesting.run(stepsOf(text, "postgres") ?? [], (sql) => void sent.push(sql));
    return sent;
  };

  it("savepoints, one per level, released or rolled back to in order", () => {
    const nesting = new Nesting();
    expect(run(nesting, "begin; begin")).toEqual([
      "savepoint flag_webhooks_nested_1",
      "savepoint flag_webhooks_nested_2",
    ]);
    expect(nesting.depth).toBe(2);
    expect(run(nesting, "rollback")).toEqual([
      "rollback to savepoint flag_webhooks_nested_2",
      "release savepoint flag_webhooks_nested_2",
    ]);
    expect(run(nesting, "commit and chain")).toEqual([
      "release savepoint flag_webhooks_nested_1",
      "savepoint flag_webhooks_nested_1",
    ]);
    expect(run(nesting, "rollback and chain")).toEqual(["rollback to savepoint flag_webhooks_nested_1"]);
    expect(() => nesting.finished()).toThrow(/never ended/);
    expect(run(nesting, "commit")).toEqual(["release savepoint flag_webhooks_nested_1"]);
    expect(nesting.depth).toBe(0);
    expect(() => nesting.finished()).not.toThrow();
  });

  it("a COMMIT or ROLLBACK with nothing begun is refused, and nothing is sent", () => {
    for (const text of ["commit", "rollback", "end"]) {
      const nesting = new Nesting();
      expect(() => run(nesting, text)).toThrow(/return to commit, throw to roll back/);
    }
  });

  it("a COMMIT whose RELEASE fails rolls back to its savepoint, and throws what failed", () => {
    const nesting = new Nesting();
    run(nesting, "begin");
    const sent: string[] = [];
    const failing = (sql: string) => {
      sent.push(sql);
      if (sql.startsWith("release") && sent.length === 1) throw new Error("current transaction is aborted");
    };
    expect(() => nesting.run(stepsOf("commit", "postgres") ?? [], failing)).toThrow("current transaction is aborted");
    expect(sent).toEqual([
      "release savepoint flag_webhooks_nested_1",
      "rollback to savepoint flag_webhooks_nested_1",
      "release savepoint flag_webhooks_nested_1",
    ]);
    expect(nesting.depth).toBe(0);
  });
});

// Each statement's own text as sent (cut at each `;` outside quotes and comments, trimmed), and
// exactly why a refused one is refused: what a handler sees in its error.
describe("stepsOf: each statement's text and refusal", () => {
  it.each([
    ["  begin ;  insert into t values (1)  ;commit  ", ["begin", "insert into t values (1)", "commit"]],
    ["select 2 - 1; commit", ["select 2 - 1", "commit"]],
    ["select 4 / 2; commit", ["select 4 / 2", "commit"]],
    ["commit -- done", ["commit -- done"]],
    ["-- first\ncommit", ["-- first\ncommit"]],
    ["select e from t; commit", ["select e from t", "commit"]],
    ["select $1::int; commit", ["select $1::int", "commit"]],
    ["select $$a; b$$; commit", ["select $$a; b$$", "commit"]],
    ["select $q$ $$; $q$; commit", ["select $q$ $$; $q$", "commit"]],
  ])("postgres: %j", (text, sqls) => {
    expect(stepsOf(text, "postgres")?.map((step) => step.sql)).toEqual(sqls);
  });

  it.each([
    ["select 'it''s; commit'; commit", ["select 'it''s; commit'", "commit"]],
    ["select [a;b]; commit", ["select [a;b]", "commit"]],
    ["select `a;b`; commit", ["select `a;b`", "commit"]],
    ['select "a;""b"; commit', ['select "a;""b"', "commit"]],
    ["/* /* */ commit", ["/* /* */ commit"]],
  ])("sqlite: %j", (text, sqls) => {
    expect(stepsOf(text, "sqlite")?.map((step) => step.sql)).toEqual(sqls);
  });

  it.each([
    // Unterminated: the rest of the text is the string, comment or name; nothing after it is read.
    ["postgres", "select $$ commit"],
    ["postgres", "select $a$ commit $b$"],
    ["postgres", "/* /* */ commit"],
    ["postgres", "select 'commit"],
    ["sqlite", "select [commit"],
    ["sqlite", "select `commit"],
    ["sqlite", "/* commit"],
  ] as const)("%s, unterminated: %j is sent as it is", (dialect, text) => {
    expect(stepsOf(text, dialect)).toBeUndefined();
  });

  it.each([["type"], ["ex"]])(
    "postgres: a word %j before a string is no E prefix (its backslash reads two ways)",
    (word) => {
      expect(controls(`select ${word}'\\'; commit`)).toEqual(["refused"]);
    },
  );

  it.each([
    [
      "begin isolation level serializable",
      "BEGIN ISOLATION LEVEL SERIALIZABLE cannot be a savepoint; write BEGIN alone",
    ],
    ["start transaction read only", "BEGIN READ ONLY cannot be a savepoint; write BEGIN alone"],
    ["commit prepared 'x'", "two-phase commit (COMMIT or ROLLBACK PREPARED)"],
    ["rollback prepared 'x'", "two-phase commit (COMMIT or ROLLBACK PREPARED)"],
    ["prepare transaction 'x'", "two-phase commit (PREPARE TRANSACTION)"],
    ["commit and rollback", "COMMIT AND ROLLBACK cannot be mapped to a savepoint"],
    ["rollback work and x", "ROLLBACK WORK AND X cannot be mapped to a savepoint"],
    ["release flag_webhooks_inbox", "savepoint flag_webhooks_inbox is the inbox's own: name your savepoints otherwise"],
    ["rollback to savepoint flag_webhooks_nested_1", "savepoint flag_webhooks_nested_1 is the inbox's own"],
  ])("postgres: %j is refused, saying why", (text, why) => {
    const steps = stepsOf(text, "postgres");
    expect(steps).toHaveLength(1);
    expect(steps?.[0]?.refused).toContain(why);
    expect(steps?.[0]?.control).toBeUndefined();
  });

  it.each([
    ["begin exclusive", "BEGIN EXCLUSIVE cannot be a savepoint"],
    ["begin deferred transaction", undefined],
    ["begin transaction immediate", "BEGIN TRANSACTION IMMEDIATE cannot be a savepoint"],
    ["commit and chain", "COMMIT AND CHAIN cannot be mapped to a savepoint"],
    ["commit and no chain", "COMMIT AND NO CHAIN cannot be mapped to a savepoint"],
  ])("sqlite: %j", (text, why) => {
    const [step] = stepsOf(text, "sqlite") ?? [];
    if (why === undefined) expect(step).toMatchObject({ control: "begin" });
    else expect(step?.refused).toContain(why);
  });

  it("postgres: START TRANSACTION begins; in SQLite it is no transaction statement", () => {
    expect(controls("start transaction")).toEqual(["begin"]);
    expect(controls("start work")).toBeUndefined();
    expect(controls("start transaction", "sqlite")).toBeUndefined();
  });

  it("a text that only names a control word somewhere else is sent as it is, whole", () => {
    expect(stepsOf("select 1 as begin_at", "postgres")).toBeUndefined();
    expect(stepsOf("update t set x = 1 where end_at > now()", "postgres")).toBeUndefined();
  });
});

describe("Nesting: each step's result, and the asynchronous path", () => {
  it("run() gives the result of each step's last statement, in order", () => {
    const nesting = new Nesting();
    const results = nesting.run(stepsOf("begin; select 1; rollback", "postgres") ?? [], (sql) => `ran ${sql}`);
    expect(results).toEqual([
      "ran savepoint flag_webhooks_nested_1",
      "ran select 1",
      "ran release savepoint flag_webhooks_nested_1",
    ]);
  });

  it("runAsync() likewise, and a COMMIT whose RELEASE fails rolls back to its savepoint and throws", async () => {
    const nesting = new Nesting();
    const sent: string[] = [];
    const results = await nesting.runAsync(stepsOf("begin; select 1", "postgres") ?? [], async (sql) => {
      sent.push(sql);
      return sql.length;
    });
    expect(results).toEqual(["savepoint flag_webhooks_nested_1".length, "select 1".length]);
    const failing = async (sql: string) => {
      sent.push(sql);
      if (sql.startsWith("release") && !sent.includes("rollback to savepoint flag_webhooks_nested_1")) {
        throw new Error("current transaction is aborted");
      }
      return 0;
    };
    await expect(nesting.runAsync(stepsOf("commit", "postgres") ?? [], failing)).rejects.toMatchObject({
      message: "current transaction is aborted",
    });
    expect(sent.slice(2)).toEqual([
      "release savepoint flag_webhooks_nested_1",
      "rollback to savepoint flag_webhooks_nested_1",
      "release savepoint flag_webhooks_nested_1",
    ]);
    expect(nesting.depth).toBe(0);
  });

  it("a step that fails without ending a savepoint undoes nothing: the depth stays, no ROLLBACK TO is sent", async () => {
    const nesting = new Nesting();
    const sent: string[] = [];
    nesting.run(stepsOf("begin", "postgres") ?? [], (sql) => void sent.push(sql));
    const failing = (sql: string) => {
      sent.push(sql);
      throw new Error("relation does not exist");
    };
    expect(() => nesting.run(stepsOf("select * from nowhere; commit", "postgres") ?? [], failing)).toThrow(
      "relation does not exist",
    );
    await expect(
      nesting.runAsync(stepsOf("begin; select 1", "postgres") ?? [], async (sql) => failing(sql)),
    ).rejects.toMatchObject({ message: "relation does not exist" });
    expect(sent).toEqual([
      "savepoint flag_webhooks_nested_1",
      "select * from nowhere",
      "savepoint flag_webhooks_nested_2",
    ]);
    expect(nesting.depth).toBe(1);
  });

  it("a refused statement is refused before anything of its text is sent, naming it", () => {
    const nesting = new Nesting();
    const sent: string[] = [];
    expect(() =>
      nesting.run(stepsOf("begin; begin isolation level serializable", "postgres") ?? [], (sql) => void sent.push(sql)),
    ).toThrow(
      "flag-webhooks: refused through the inbox's tx: begin isolation level serializable: a nested transaction takes",
    );
    expect(sent).toEqual(["savepoint flag_webhooks_nested_1"]);
  });

  it("a refusal names at most 80 characters of the statement", () => {
    const long = `commit prepared '${"x".repeat(200)}'`;
    const error = (() => {
      try {
        new Nesting().run(stepsOf(long, "postgres") ?? [], () => undefined);
      } catch (caught) {
        return caught as Error;
      }
    })();
    expect(error?.message).toContain(`: ${long.slice(0, 80)}: two-phase commit`);
  });
});
