// `flag-webhooks inbox list|show|replay|purge`: looking at and acting on the events a
// keep-then-work inbox kept, from a terminal, against a Postgres URL or a SQLite file. It only
// calls the inbox's own methods (pending, parked, kept, counts, replay, purge), so the command and
// the code decide alike; nothing is removed unless a purge names what.
import { parseDuration } from "../util/duration.js";
import { type Command, type CommandArgs, CommandError, UsageError } from "./command.js";
import { DB_ENV, databaseProblem, type OpenInbox, openInbox, underlying } from "./inbox-db.js";
import { Progress } from "./inbox-progress.js";
import { eventDetails, eventTable } from "./inbox-table.js";
import { echoed, printable, printableId, readBack, terminalJson } from "./terminal-text.js";

const ACTIONS = ["list", "show", "replay", "purge"] as const;
type Action = (typeof ACTIONS)[number];

export const inboxCommand: Command = {
  name: "inbox",
  summary: "List, show, replay or purge the events an inbox kept",
  usage: "flag-webhooks inbox <list|show|replay|purge> [id...] --db <url|file> --scope <scope> [options]",
  description:
    "Looks at and acts on the events a keep-then-work inbox (inbox.enqueue() and inbox.work()) kept, in\n" +
    "a Postgres database (a postgres:// URL, through the pg package) or a SQLite file (through\n" +
    "better-sqlite3). list prints the pending and parked events as a table; show prints one event and\n" +
    "its body; replay makes parked events due again, with all their attempts; purge deletes the events\n" +
    "it is told to, and says how many. Nothing is deleted unless purge names an id or a --state.",
  options: {
    db: {
      type: "string",
      valueName: "url|file",
      description: `A postgres:// URL or a SQLite file (default: $${DB_ENV})`,
    },
    scope: { type: "string", valueName: "scope", description: "The inbox's scope, as the app passes it (required)" },
    table: { type: "string", valueName: "table", description: "The inbox's table", default: "flag_webhooks_inbox" },
    state: {
      type: "string",
      valueName: "state",
      description: "list: pending, parked or all (default: all); purge: the state to delete, parked, pending or done",
    },
    limit: { type: "string", valueName: "n", description: "list: the most events to print", default: "100" },
    since: {
      type: "string",
      valueName: "time",
      description: 'replay: every parked or pending event received since then (an ISO date, or a duration ago: "24h")',
    },
    all: { type: "boolean", description: "replay: every parked or pending event" },
    before: { type: "string", valueName: "time", description: "purge: only events received before then" },
    wait: { type: "boolean", description: "replay: wait until no event is pending or running (a worker must run)" },
    progress: { type: "boolean", description: "Print the progress line on stderr even when it is not a terminal" },
    json: { type: "boolean", description: "list, show: print JSON instead of a table" },
  },
  examples: [
    `export ${DB_ENV}=postgres://app@localhost/app`,
    "flag-webhooks inbox list --scope billing",
    "flag-webhooks inbox show evt_01HZ... --scope billing",
    "flag-webhooks inbox replay --since 24h --scope billing --wait",
    "flag-webhooks inbox purge --state parked --before 2026-01-01 --scope billing --db ./inbox.db",
  ],
  run: runInbox,
};

async function runInbox(args: CommandArgs): Promise<number> {
  const { values, positionals, env } = args;
  const [action, ...ids] = positionals;
  if (action === undefined) throw new UsageError("missing what to do: list, show, replay or purge");
  if (!(ACTIONS as readonly string[]).includes(action)) {
    throw new UsageError(`unknown action ${echoed(action)}: list, show, replay or purge`);
  }
  const db = values.db ?? env[DB_ENV];
  if (typeof db !== "string" || db === "") throw new UsageError(`no database: pass --db <url|file> or set ${DB_ENV}`);
  if (typeof values.scope !== "string") throw new UsageError("missing --scope <scope>: the scope the app's inbox uses");
  const run = ACTION_RUNS[action as Action];
  run.check(values, ids);
  const open = await openInbox({ db, scope: values.scope, table: values.table as string | undefined });
  try {
    return await run.act(open, values, ids, args);
  } catch (error) {
    if (error instanceof CommandError || error instanceof UsageError) throw error;
    throw new CommandError(`the ${open.kind} inbox: ${databaseProblem(error, db)}${hint(error)}`);
  } finally {
    await open.close().catch(() => {});
  }
}

interface ActionRun {
  /** Refuses a wrong call before the database is opened. */
  check(values: CommandArgs["values"], ids: string[]): void;
  act(open: OpenInbox, values: CommandArgs["values"], ids: string[], args: CommandArgs): Promise<number>;
}

const ACTION_RUNS: Record<Action, ActionRun> = {
  list: {
    check(values, ids) {
      if (ids.length) throw new UsageError("list takes no id (show <id> prints one event)");
      stateOf(values, ["pending", "parked", "all"], "all");
      limitOf(values);
    },
    async act({ inbox }, values, _ids, { stdout }) {
      const state = stateOf(values, ["pending", "parked", "all"], "all");
      const limit = limitOf(values);
      const pending = state === "parked" ? [] : await inbox.pending({ limit });
      const parked = state === "pending" ? [] : await inbox.parked({ limit });
      const events = [...pending, ...parked].sort((a, b) => (a.receivedAt ?? 0) - (b.receivedAt ?? 0)).slice(0, limit);
      if (values.json) {
        stdout.write(`${terminalJson(events)}\n`);
        return 0;
      }
      const what = state === "all" ? "pending or parked" : state;
      if (events.length === 0) {
        stdout.write(`No ${what} events in scope "${printable(String(values.scope))}".\n`);
        return 0;
      }
      stdout.write(eventTable(events, Date.now()));
      if (pending.length === limit || parked.length === limit) {
        stdout.write(`(the first ${limit} ${what} events: --limit <n> to see more)\n`);
      }
      return 0;
    },
  },
  show: {
    check(_values, ids) {
      if (ids.length !== 1) throw new UsageError("show takes one event id");
    },
    async act({ inbox }, values, ids, { stdout }) {
      const id = ids[0] as string;
      const event = await inbox.kept(await idMeant(inbox, id));
      if (!event) throw new CommandError(`no event ${printableId(id)} in scope "${printable(String(values.scope))}"`);
      stdout.write(values.json ? `${terminalJson(event)}\n` : eventDetails(event, Date.now()));
      return 0;
    },
  },
  replay: {
    check(values, ids) {
      const targets = [ids.length > 0, values.since !== undefined, values.all === true].filter(Boolean).length;
      if (targets !== 1) throw new UsageError("replay takes event ids, or --since <time>, or --all (one of them)");
      if (values.since !== undefined) instantOf(values.since, "since");
    },
    async act({ inbox }, values, ids, { stdout, stderr }) {
      const progress = new Progress(stderr, values.progress === true);
      let replayed = 0;
      if (ids.length > 0) {
        for (const [index, id] of ids.entries()) {
          replayed += await inbox.replay(await idMeant(inbox, id));
          progress.update(`replaying: ${index + 1} of ${ids.length}`);
        }
      } else {
        const since = values.all ? 0 : instantOf(values.since, "since");
        replayed = await inbox.replay({ since });
      }
      progress.end();
      stdout.write(`Replayed ${replayed} ${replayed === 1 ? "event" : "events"}: due now, with all their attempts.\n`);
      if (!values.wait || replayed === 0) return 0;
      const counts = await waitForWorkers(inbox, progress);
      stdout.write(`No event is pending or running; ${counts.parked} parked.\n`);
      return 0;
    },
  },
  purge: {
    check(values, ids) {
      if (ids.length > 0 && (values.state !== undefined || values.before !== undefined)) {
        throw new UsageError("purge takes event ids, or --state <state> [--before <time>], not both");
      }
      if (ids.length === 0 && values.state === undefined) {
        throw new UsageError("purge deletes only what it is told: pass event ids, or --state parked|pending|done");
      }
      if (ids.length === 0) stateOf(values, ["parked", "pending", "done"]);
      if (values.before !== undefined) instantOf(values.before, "before");
    },
    async act({ inbox }, values, ids, { stdout }) {
      let purged = 0;
      if (ids.length > 0) for (const id of ids) purged += await inbox.purge(await idMeant(inbox, id));
      else {
        const state = stateOf(values, ["parked", "pending", "done"]) as "parked" | "pending" | "done";
        const before = values.before === undefined ? {} : { before: instantOf(values.before, "before") };
        purged = await inbox.purge({ state, ...before });
      }
      stdout.write(`Purged ${purged} ${purged === 1 ? "event" : "events"}.\n`);
      return 0;
    },
  },
};

/**
 * The event an id given on the command line names: the id with the table's escapes (`\x9b`, a
 * doubled backslash) read back when an event has it, so that an id copied from `list` works, or
 * else the id as typed.
 */
async function idMeant(inbox: OpenInbox["inbox"], id: string): Promise<string> {
  // The printed form first: an id typed as the table shows it may also be another id as typed
  // (the four characters \x1b of one, the ESC of another, printed \\x1b and \x1b).
  const unescaped = readBack(id);
  if (unescaped !== id && (await inbox.kept(unescaped))) return unescaped;
  return id;
}

/** Follows the inbox's counts until nothing is pending or running, on the progress line. */
async function waitForWorkers(inbox: OpenInbox["inbox"], progress: Progress) {
  for (;;) {
    const counts = await inbox.counts();
    progress.update(
      `waiting for the workers: ${counts.pending} pending, ${counts.running} running, ${counts.parked} parked`,
    );
    if (counts.pending === 0 && counts.running === 0) {
      progress.end();
      return counts;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

function stateOf(values: CommandArgs["values"], allowed: readonly string[], fallback?: string): string {
  const state = values.state ?? fallback;
  if (typeof state !== "string" || !allowed.includes(state)) {
    throw new UsageError(`--state must be ${allowed.slice(0, -1).join(", ")} or ${allowed.at(-1)}`);
  }
  return state;
}

function limitOf(values: CommandArgs["values"]): number {
  const limit = Number(values.limit);
  if (!/^\d+$/.test(String(values.limit)) || !Number.isSafeInteger(limit) || limit < 1) {
    throw new UsageError(`--limit must be a whole number from 1, got ${JSON.stringify(values.limit)}`);
  }
  return limit;
}

/** An instant from an ISO date or a duration ago ("24h"), in ms since the epoch. */
function instantOf(value: unknown, option: string): number {
  const text = String(value);
  if (/^\d+(\.\d+)?\s*(ms|s|m|h|d)$/i.test(text.trim())) return Date.now() - parseDuration(text, option);
  const ms = /^\d{4}-\d{2}-\d{2}/.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(ms)) {
    throw new UsageError(
      `--${option} must be an ISO date (2026-05-01T12:00Z) or a duration ago (24h), got ${JSON.stringify(text)}`,
    );
  }
  return ms;
}

/** What to check when a statement failed on the table itself. */
function hint(error: unknown): string {
  const cause = underlying(error);
  const message = cause instanceof Error ? cause.message : String(cause);
  return /column|no such table|does not exist/i.test(message)
    ? " (is this the inbox's table, migrated by this version's inbox.migrate()?)"
    : "";
}
