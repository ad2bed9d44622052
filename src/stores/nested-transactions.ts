// A handler runs inside the inbox's transaction, and the ordinary way to write a transaction
// (BEGIN; …; COMMIT, ROLLBACK on error) would end it: COMMIT would commit the event id before the
// delivery is decided, ROLLBACK would undo it and leave the handler's later writes to commit on
// their own. So, as Drizzle, Knex and TypeORM do for a nested transaction, the statements that
// begin, commit or roll back a transaction, sent through `tx`, become savepoints inside the
// inbox's transaction; those that cannot be mapped so (a COMMIT with no BEGIN before it, a BEGIN
// asking for an isolation level, two-phase commit) are refused with an error that says what to
// write instead. The one rule for both inboxes; each driver only routes its statements here.

/** Which SQL the statements are in: what a transaction statement may look like differs. */
export type Dialect = "postgres" | "sqlite";

/** A statement of a text, and what it does to a transaction. */
export interface Step {
  /** The statement's text, as sent (without its `;`). */
  sql: string;
  /** Undefined for any statement that leaves the transaction as it is. */
  control?: "begin" | "commit" | "rollback" | "commit-chain" | "rollback-chain";
  /** Why the statement is refused, when it ends the transaction in a way no savepoint can stand for. */
  refused?: string;
}

// Only a text holding one of these words can hold a transaction statement: the others are sent
// as they are, unread.
const CONTROL_WORD = /\b(?:begin|start|commit|end|rollback|abort|prepare|release)\b/i;

/**
 * The statements of `text` with what each does to the transaction; undefined when none begins,
 * commits or rolls back one (the text is then sent as it is).
 */
export function stepsOf(text: string, dialect: Dialect): Step[] | undefined {
  if (!CONTROL_WORD.test(text)) return undefined;
  const steps = read(text, dialect, STANDARD);
  // Where a backslash makes Postgres's possible readings cut or classify the text differently, a
  // COMMIT one reading takes for part of a string could run in another, so such a text is refused
  // rather than guessed at (see Reading: the session's settings, which a handler may change, decide).
  if (
    dialect === "postgres" &&
    text.includes("\\") &&
    !READINGS.every((way) => sameSteps(steps, read(text, dialect, way)))
  ) {
    return [
      {
        sql: text,
        refused:
          "a backslash in a '…' string makes this text read differently with standard_conforming_strings on and off; write E'…' for an escape, or send the transaction statement on its own",
      },
    ];
  }
  return steps;
}

/**
 * How Postgres may read a backslash in a string, as the session is set: in a plain '…' string, an
 * escape once standard_conforming_strings is off (`plainEscapes`); and, in a client encoding where
 * a character's second byte may be a backslash's (SJIS, BIG5, GBK, UHC…), part of the non-ASCII
 * character before it rather than an escape (`swallowed`), which a text sent as UTF-8 can make.
 */
interface Reading {
  plainEscapes: boolean;
  swallowed: boolean;
}

/** Postgres's default reading: a backslash escapes only in E'…' strings. */
const STANDARD: Reading = { plainEscapes: false, swallowed: false };
const READINGS: readonly Reading[] = [
  { plainEscapes: true, swallowed: false },
  { plainEscapes: false, swallowed: true },
  { plainEscapes: true, swallowed: true },
];

/** The steps of `text` read one way, or undefined. */
function read(text: string, dialect: Dialect, way: Reading): Step[] | undefined {
  const steps = split(text, dialect, way).map((statement) => ({
    sql: statement.sql,
    ...classify(statement, dialect),
  }));
  return steps.some((step) => step.control !== undefined || step.refused !== undefined) ? steps : undefined;
}

/** Whether two readings of a text agree on its statements and on what each does. */
function sameSteps(a: Step[] | undefined, b: Step[] | undefined): boolean {
  const shape = (steps: Step[] | undefined) =>
    JSON.stringify(steps?.map(({ sql, control, refused }) => [sql, control, refused]));
  return shape(a) === shape(b);
}

/**
 * A statement's words in upper case (a quoted name, a literal or a symbol is `""`), and its names:
 * the same, but a quoted name or string as the name SQLite reads it (`"a"`, `[a]`, `` `a` `` and
 * `'a'` all name a savepoint `a`).
 */
interface Statement {
  sql: string;
  words: string[];
  names: string[];
}

/**
 * Cuts `text` into statements at each `;` outside quotes and comments: `'…'` (and Postgres's
 * `E'…'` with backslash escapes, and `$tag$…$tag$`), `"…"` (and SQLite's `` `…` `` and `[…]`),
 * `-- …` and `/* … *\/` (nested in Postgres). Empty statements are left out.
 */
function split(text: string, dialect: Dialect, way: Reading = STANDARD): Statement[] {
  const statements: Statement[] = [];
  let start = 0;
  let words: string[] = [];
  let names: string[] = [];
  let i = 0;
  const end = () => {
    const sql = text.slice(start, i).trim();
    if (words.length > 0) statements.push({ sql, words, names });
    words = [];
    names = [];
  };
  while (i < text.length) {
    const c = text[i] as string;
    const next = text[i + 1];
    if (c === ";") {
      end();
      start = ++i;
    } else if (/\s/.test(c)) {
      i++;
    } else if (c === "-" && next === "-") {
      const line = text.indexOf("\n", i);
      i = line < 0 ? text.length : line + 1;
    } else if (c === "/" && next === "*") {
      i = commentEnd(text, i, dialect === "postgres");
    } else if (/[A-Za-z_]/.test(c)) {
      const word = /^[A-Za-z_][A-Za-z0-9_$]*/.exec(text.slice(i))?.[0] as string;
      i += word.length;
      if (dialect === "postgres" && /^e$/i.test(word) && text[i] === "'") {
        i = quoteEnd(text, i, "'", true, way.swallowed);
        words.push("");
        names.push("");
      } else {
        words.push(word.toUpperCase());
        names.push(word.toUpperCase());
      }
    } else {
      const from = i;
      i = otherEnd(text, i, dialect, way);
      words.push("");
      names.push(quotedName(text.slice(from, i)));
    }
  }
  end();
  return statements;
}

/** The index after the comment that starts at `i` (`/*`), nested comments counted where `nested`. */
function commentEnd(text: string, i: number, nested: boolean): number {
  let depth = 0;
  while (i < text.length) {
    if (text.startsWith("/*", i) && (nested || depth === 0)) {
      depth++;
      i += 2;
    } else if (text.startsWith("*/", i)) {
      i += 2;
      if (--depth === 0) return i;
    } else i++;
  }
  return i;
}

/**
 * The index after the quoted text that starts at `i` with `quote` (doubled to escape; `\` too
 * where `backslash`, unless `swallowed` and it follows a non-ASCII character: see Reading).
 */
function quoteEnd(text: string, i: number, quote: string, backslash = false, swallowed = false): number {
  for (i++; i < text.length; i++) {
    if (backslash && text[i] === "\\" && !(swallowed && text.charCodeAt(i - 1) > 0x7f)) i++;
    else if (text[i] === quote) {
      if (text[i + 1] !== quote) return i + 1;
      i++;
    }
  }
  return i;
}

/** The index after a token that is no word: a quoted name or literal, a dollar-quoted body, or one symbol. */
function otherEnd(text: string, i: number, dialect: Dialect, way: Reading): number {
  const c = text[i] as string;
  if (c === "'") return quoteEnd(text, i, c, way.plainEscapes && dialect === "postgres", way.swallowed);
  if (c === '"') return quoteEnd(text, i, c);
  if (dialect === "sqlite" && c === "`") return quoteEnd(text, i, c);
  if (dialect === "sqlite" && c === "[") {
    const close = text.indexOf("]", i);
    return close < 0 ? text.length : close + 1;
  }
  const tag = dialect === "postgres" && c === "$" ? /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(text.slice(i))?.[0] : null;
  if (tag) {
    const close = text.indexOf(tag, i + tag.length);
    return close < 0 ? text.length : close + tag.length;
  }
  return i + 1;
}

/** The name a quoted token stands for, in upper case (its quotes off, a doubled quote as one); "" for any other token. */
function quotedName(token: string): string {
  const open = token[0] as string;
  const close = open === "[" ? "]" : open;
  if (!"\"'`[".includes(open) || token.length < 2 || token.at(-1) !== close) return "";
  const inside = token.slice(1, -1);
  return (open === "[" ? inside : inside.replaceAll(open + open, open)).toUpperCase();
}

const NOISE = new Set(["WORK", "TRANSACTION"]);

/** What a statement of these words does to the transaction (nothing for most). */
function classify({ words, names }: Statement, dialect: Dialect): Omit<Step, "sql"> {
  const [first, second] = words;
  if (first === "START" && second === "TRANSACTION" && dialect === "postgres") return begin(words.slice(2), dialect);
  if (first === "BEGIN") return begin(words.slice(1), dialect);
  if (first === "COMMIT" || first === "END") return end(words.slice(1), names, dialect, "commit");
  if (first === "ROLLBACK" || (first === "ABORT" && dialect === "postgres")) {
    return end(words.slice(1), names, dialect, "rollback");
  }
  if (first === "RELEASE") return ownSavepoint(names);
  if (first === "PREPARE" && second === "TRANSACTION") {
    return { refused: "two-phase commit (PREPARE TRANSACTION) cannot run inside the inbox's transaction" };
  }
  return {};
}

/** BEGIN, START TRANSACTION: a savepoint, unless it asks for what a savepoint cannot give. */
function begin(rest: string[], dialect: Dialect): Omit<Step, "sql"> {
  const modes = rest.filter((word, index) => !(index === 0 && (NOISE.has(word) || isSqliteMode(word, dialect))));
  const words = dialect === "sqlite" && NOISE.has(modes[0] as string) ? modes.slice(1) : modes;
  if (words.length === 0) return { control: "begin" };
  return {
    refused: `a nested transaction takes the inbox's isolation and locks: BEGIN ${rest.join(" ")} cannot be a savepoint; write BEGIN alone`,
  };
}

/** SQLite's BEGIN DEFERRED or IMMEDIATE: the inbox already holds the write lock, so either is met. */
function isSqliteMode(word: string, dialect: Dialect): boolean {
  return dialect === "sqlite" && (word === "DEFERRED" || word === "IMMEDIATE");
}

/**
 * RELEASE or ROLLBACK TO a savepoint: the handler's own pass; the inbox's (its mark, the savepoints
 * that stand for the handler's transactions) are refused: rolling back to its mark would undo the
 * event's record while the transaction still commits as handled.
 */
function ownSavepoint(names: string[]): Omit<Step, "sql"> {
  const name = names[names.length - 1] as string;
  if (!name.startsWith("FLAG_WEBHOOKS")) return {};
  return { refused: `savepoint ${name.toLowerCase()} is the inbox's own: name your savepoints otherwise` };
}

/** COMMIT, END, ROLLBACK, ABORT: the savepoint released or rolled back to; a ROLLBACK TO passes. */
function end(rest: string[], names: string[], dialect: Dialect, how: "commit" | "rollback"): Omit<Step, "sql"> {
  const words = NOISE.has(rest[0] as string) ? rest.slice(1) : rest;
  if (how === "rollback" && words[0] === "TO") return ownSavepoint(names);
  const chain = words.join(" ");
  if (chain === "") return { control: how };
  if (dialect === "postgres" && chain === "AND NO CHAIN") return { control: how };
  if (dialect === "postgres" && chain === "AND CHAIN")
    return { control: how === "commit" ? "commit-chain" : "rollback-chain" };
  if (words[0] === "PREPARED") {
    return { refused: "two-phase commit (COMMIT or ROLLBACK PREPARED) cannot run inside the inbox's transaction" };
  }
  return { refused: `${how.toUpperCase()} ${rest.join(" ")} cannot be mapped to a savepoint` };
}

/**
 * The transactions a handler began through `tx`, as savepoints of the inbox's transaction: what
 * each transaction statement becomes, in order, and whether any is left open when the handler
 * ends. One per delivery.
 */
export class Nesting {
  #depth = 0;

  /** The savepoints a handler's transaction statements stand for. */
  get depth(): number {
    return this.#depth;
  }

  /**
   * The statements to run for `step`, and the depth once they ran; a TypeError for a step
   * refused, or a COMMIT or ROLLBACK with no BEGIN of the handler's before it.
   */
  #plan(step: Step): { sqls: string[]; depth: number } {
    if (step.refused) throw refusal(step.sql, step.refused);
    const depth = this.#depth;
    if (step.control === undefined) return { sqls: [step.sql], depth };
    if (step.control === "begin") return { sqls: [`savepoint ${name(depth + 1)}`], depth: depth + 1 };
    if (depth === 0) {
      throw refusal(
        step.sql,
        "the inbox commits the event id and the handler's writes together once the delivery is answered 2xx: return to commit, throw to roll back (or BEGIN first, to make a savepoint of your own)",
      );
    }
    const release = `release savepoint ${name(depth)}`;
    const undo = `rollback to savepoint ${name(depth)}`;
    if (step.control === "commit") return { sqls: [release], depth: depth - 1 };
    if (step.control === "rollback") return { sqls: [undo, release], depth: depth - 1 };
    if (step.control === "commit-chain") return { sqls: [release, `savepoint ${name(depth)}`], depth };
    return { sqls: [undo], depth };
  }

  /**
   * Runs `steps` one statement at a time through `run` (synchronous); the result of each step's
   * last statement. A COMMIT whose savepoint cannot be released (Postgres: a statement inside
   * it failed) rolls back to it, and throws: what it held is undone, the inbox's transaction
   * goes on.
   */
  run<R>(steps: readonly Step[], run: (sql: string) => R): R[] {
    const results: R[] = [];
    for (const step of steps) {
      const { sqls, depth } = this.#plan(step);
      try {
        for (const [index, sql] of sqls.entries()) {
          const result = run(sql);
          if (index === sqls.length - 1) results.push(result);
        }
      } catch (error) {
        if (depth < this.#depth) this.#undo(run);
        throw error;
      }
      this.#depth = depth;
    }
    return results;
  }

  /** {@link run}, with `run` asynchronous. */
  async runAsync<R>(steps: readonly Step[], run: (sql: string) => Promise<R>): Promise<R[]> {
    const results: R[] = [];
    for (const step of steps) {
      const { sqls, depth } = this.#plan(step);
      try {
        for (const [index, sql] of sqls.entries()) {
          const result = await run(sql);
          if (index === sqls.length - 1) results.push(result);
        }
      } catch (error) {
        if (depth < this.#depth) await this.#undo(run);
        throw error;
      }
      this.#depth = depth;
    }
    return results;
  }

  /** Rolls back to the innermost savepoint and releases it, whatever fails: the step that ended it failed. */
  #undo<R>(run: (sql: string) => R): R | Promise<void> | undefined {
    const depth = this.#depth;
    this.#depth = depth - 1;
    const sql = [`rollback to savepoint ${name(depth)}`, `release savepoint ${name(depth)}`];
    try {
      const first = run(sql[0] as string);
      if (first instanceof Promise) {
        return first
          .then(() => run(sql[1] as string))
          .then(
            () => {},
            () => {},
          );
      }
      run(sql[1] as string);
    } catch {
      // The inbox's own check at COMMIT sees a transaction that cannot go on.
    }
    return undefined;
  }

  /** Throws when the handler ended with a transaction it began through `tx` still open: nothing of it is committed. */
  finished(): void {
    if (this.#depth > 0) {
      throw new Error(
        "flag-webhooks: the handler began a transaction through tx (BEGIN) and never ended it (COMMIT or ROLLBACK): the inbox does not commit it",
      );
    }
  }
}

/** The savepoint that stands for the handler's transaction at `depth`. */
const name = (depth: number) => `flag_webhooks_nested_${depth}`;

/** The error of a statement refused through the inbox's tx: the statement, and why. */
export function refusal(sql: string, why: string): Error {
  return new Error(`flag-webhooks: refused through the inbox's tx: ${sql.slice(0, 80)}: ${why}`);
}
