// How `flag-webhooks inbox` opens the inbox it is pointed at: a Postgres URL through `pg`, or a
// SQLite file through `better-sqlite3` (or Node's own node:sqlite). Both are optional peers of the package, loaded only here,
// when the subcommand runs, so that `send` or `sign` never need them; a missing one is named.
import { existsSync } from "node:fs";
import { PostgresInbox } from "../stores/postgres/index.js";
import { SqliteInbox } from "../stores/sqlite/index.js";
import { CommandError, UsageError } from "./command.js";
import { mayHoldSecret } from "./terminal-text.js";

/** The environment variable that holds the database, so that a password stays out of shell history. */
export const DB_ENV = "FLAG_WEBHOOKS_DB";

/** An inbox opened by the command, and how to let go of its database. */
export interface OpenInbox {
  inbox: PostgresInbox | SqliteInbox;
  /** "Postgres" or "SQLite", for messages. */
  kind: string;
  close(): Promise<void>;
}

/** What the command needs to open an inbox: where, which scope, which table. */
export interface InboxTarget {
  db: string;
  scope: string;
  table?: string;
}

/** By a name in a variable: the Node 20 types the package is built with know no node:sqlite. */
const BUILT_IN_SQLITE = "node:sqlite";

const POSTGRES_URL = /^postgres(?:ql)?:\/\//i;

/** Opens the inbox of `target`: a Postgres URL or a SQLite file that exists (never one made here). */
export async function openInbox(target: InboxTarget): Promise<OpenInbox> {
  const options = { scope: target.scope, ...(target.table ? { table: target.table } : {}) };
  if (POSTGRES_URL.test(target.db)) {
    const pg = await loadPeer<{ default: { Pool: new (config: object) => PgPool } }>("pg", "a Postgres inbox");
    const pool = new pg.default.Pool({ connectionString: target.db, max: 2 });
    // An idle client's error (the server restarted) must not end the command with a stack.
    pool.on("error", () => {});
    return { inbox: inboxOf(() => new PostgresInbox(pool, options)), kind: "Postgres", close: () => pool.end() };
  }
  if (!existsSync(target.db)) {
    throw new CommandError(
      mayHoldSecret(target.db)
        ? "the database given is neither a postgres:// URL nor an existing SQLite file (not shown: it may hold a password); pass a postgres:// URL or the path of a SQLite file"
        : `no such SQLite file: ${target.db} (for Postgres, pass a postgres:// URL)`,
    );
  }
  const db = await openSqliteFile(target.db);
  return {
    inbox: inboxOf(() => new SqliteInbox(db as never, options)),
    kind: "SQLite",
    close: async () => void db.close(),
  };
}

/** The part of a `pg` Pool the command uses (and the inbox recognises it by). */
interface PgPool {
  totalCount: number;
  connect(): Promise<unknown>;
  query(...args: never[]): unknown;
  on(event: "error", listener: () => void): void;
  end(): Promise<void>;
}

interface SqliteFile {
  close(): void;
}

/**
 * Opens an existing SQLite file with better-sqlite3, or, where it is not installed or was built for
 * another Node (its native module fails to load), with the runtime's own node:sqlite (Node 22.5
 * and later), so a Node 22 user needs no package to look at an inbox.
 */
async function openSqliteFile(file: string): Promise<SqliteFile> {
  let peer: unknown;
  try {
    const sqlite = await loadPeer<{ default: new (file: string, options: object) => SqliteFile }>(
      "better-sqlite3",
      "a SQLite inbox",
    );
    return new sqlite.default(file, { fileMustExist: true });
  } catch (error) {
    peer = error;
  }
  const builtIn = (await import(BUILT_IN_SQLITE).catch(() => undefined)) as
    | { DatabaseSync: new (file: string) => SqliteFile }
    | undefined;
  if (!builtIn) {
    throw peer instanceof CommandError
      ? peer
      : new CommandError(`could not open the SQLite file ${fileName(file)}: ${messageOf(peer)}`);
  }
  try {
    return new builtIn.DatabaseSync(file);
  } catch (error) {
    throw new CommandError(`could not open the SQLite file ${fileName(file)}: ${messageOf(error)}`);
  }
}

/**
 * A SQLite file's path for a message, unless it reads as a connection string (a `--db` value the
 * command did not read as a postgres:// URL may still be one).
 */
function fileName(file: string): string {
  return mayHoldSecret(file) ? "given" : file;
}

/** The inbox, with an option the inbox refuses (the scope, the table) turned into a usage error. */
function inboxOf<T>(make: () => T): T {
  try {
    return make();
  } catch (error) {
    throw new UsageError(messageOf(error).replace(/^flag-webhooks: /, ""));
  }
}

/** Imports an optional peer, or says which package to install for what. */
export async function loadPeer<T>(name: string, what: string): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch (error) {
    if (
      (error as { code?: string }).code === "ERR_MODULE_NOT_FOUND" ||
      /Cannot find (module|package)/.test(messageOf(error))
    ) {
      throw new CommandError(`${what} needs the ${name} package: npm install ${name}`);
    }
    throw new CommandError(`could not load ${name}: ${messageOf(error)}`);
  }
}

/** A database's failure as one line, with any password of a connection string hidden. */
export function databaseProblem(error: unknown, db: string): string {
  return hidePassword(messageOf(underlying(error)), db);
}

/**
 * What the database itself said under an inbox's "unavailable; retry later": a sender is told to
 * retry, but a person at the command line needs the cause (a missing column, a refused login).
 */
export function underlying(error: unknown): unknown {
  let found = error;
  for (let depth = 0; depth < 8 && found instanceof Error && found.cause !== undefined; depth++) found = found.cause;
  return found;
}

/** `text` with the password of `db` (a connection string), as written or decoded, replaced by `***`. */
export function hidePassword(text: string, db: string): string {
  let hidden = text;
  for (const password of passwordsOf(db)) hidden = hidden.split(password).join("***");
  return hidden;
}

function passwordsOf(db: string): string[] {
  if (!POSTGRES_URL.test(db)) return [];
  try {
    const { password } = new URL(db);
    let decoded = password;
    try {
      decoded = decodeURIComponent(password);
    } catch {
      // A password that is not valid percent-encoding is hidden as written.
    }
    return [password, decoded].filter((value) => value !== "");
  } catch {
    return [];
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
