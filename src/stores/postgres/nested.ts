// What a Postgres handler gets as `tx`: the client itself, but with its transaction statements
// routed through the one rule of src/stores/nested-transactions.ts. On pg they become savepoints
// (node-postgres has no transaction helper: its docs show BEGIN, COMMIT and ROLLBACK sent through
// client.query, the pattern a handler reuses); postgres.js has its own nested transactions
// (tx.savepoint), so a transaction statement sent through its tx is refused, naming it.
import { type Nesting, refusal, type Step, stepsOf } from "../nested-transactions.js";

/** A pg client's query, as the handler may call it: text or a config, values, a callback. */
type PgQuery = (...args: unknown[]) => unknown;

/**
 * `client` for the handler: every method as it is, but `query` sends a text that begins, commits
 * or rolls back a transaction as the savepoints `nesting` says (one statement at a time; the
 * result of a text of several is the list of each one's result, as pg gives it).
 */
export function pgTx(client: object, nesting: Nesting): unknown {
  const target = client as { query: PgQuery };
  const query: PgQuery = (...args) => {
    const [config] = args;
    const text = typeof config === "string" ? config : textOf(config);
    // pg is handed the text read here, never the config's own `text` again (a getter could answer
    // it a COMMIT where it answered this reading a SELECT).
    if (text !== undefined && typeof config === "object" && config !== null && !isSubmittable(config))
      args[0] = withText(config, text);
    const steps = text === undefined ? undefined : stepsOf(text, "postgres");
    if (!steps) return target.query(...args);
    const callback = [...args, (config as { callback?: unknown }).callback].find(
      (arg): arg is (error: unknown, result?: unknown) => void => typeof arg === "function",
    );
    if (isSubmittable(config)) return refuseSubmittable(config, steps, callback);
    const done = nesting
      .runAsync(steps, (sql) => target.query(sql) as Promise<unknown>)
      .then((results) => (results.length === 1 ? results[0] : results));
    if (!callback) return done;
    done.then(
      (result) => callback(null, result),
      (error: unknown) => callback(error),
    );
    return undefined;
  };
  return forwarding(client, { query });
}

/** A pg query config's text, a Submittable's (pg.Query, a cursor, a stream) as well. */
function textOf(config: unknown): string | undefined {
  const c = config as { text?: unknown } | null;
  return typeof c?.text === "string" ? c.text : undefined;
}

/** `config` with `text` as its text: its other members (values, name, rowMode, types…) read through it. */
function withText(config: object, text: string): object {
  return Object.create(config, { text: { value: text, enumerable: true } });
}

/** A Submittable: pg hands it the connection and it sends its own statements. */
interface Submittable {
  submit: unknown;
  callback?: unknown;
  handleError?: (error: unknown) => void;
}

function isSubmittable(config: unknown): config is Submittable {
  return typeof (config as { submit?: unknown } | null)?.submit === "function";
}

/**
 * A Submittable that begins, commits or rolls back a transaction is refused: it sends its text to
 * the connection itself, so it cannot become savepoints, and sent as it is it would end the inbox's
 * transaction mid-handler. The refusal reaches it as pg's own errors do (its handleError, on a
 * later tick, so listeners attached after the call hear it); the Submittable is returned, as pg does.
 */
function refuseSubmittable(
  submittable: Submittable,
  steps: readonly Step[],
  callback: ((error: unknown) => void) | undefined,
): Submittable {
  const statement = steps.find((step) => step.control !== undefined || step.refused !== undefined)?.sql ?? "";
  const error = refusal(
    statement,
    'a transaction statement sent as a Submittable (pg.Query, a cursor, a stream) cannot become a savepoint: send it as text, tx.query("BEGIN")',
  );
  if (callback && typeof submittable.callback !== "function") submittable.callback = callback;
  const handleError = submittable.handleError;
  if (typeof handleError !== "function") throw error;
  void Promise.resolve().then(() => handleError.call(submittable, error));
  return submittable;
}

/**
 * postgres.js's `tx` for the handler: as it is, but a statement that begins, commits or rolls
 * back a transaction (tagged, or through `unsafe`) throws at once, naming `tx.savepoint`; and once
 * `ended()` (the inbox committed, rolled back, or gave up the transaction past a deadline), every
 * statement throws: postgres.js would run it on the connection, outside any transaction, where
 * it commits on its own (pg's client, dropped or given back, refuses it the same way).
 */
export function postgresJsTx(tx: (...args: never[]) => unknown, ended: () => boolean = () => false): unknown {
  const live = () => {
    if (ended()) {
      throw new Error(
        "flag-webhooks: the inbox's transaction has ended (it was decided, or the attempt ran past its deadline): this statement through tx is not run",
      );
    }
  };
  const check = (text: string) => {
    live();
    const steps = stepsOf(text, "postgres");
    if (!steps) return;
    const statement = steps.find((step) => step.control !== undefined || step.refused !== undefined)?.sql ?? text;
    throw new Error(
      `flag-webhooks: refused through the inbox's tx: ${statement.slice(0, 80)}: the handler runs inside the inbox's transaction; for a transaction of its own, use postgres.js's tx.savepoint(async (sp) => …), which rolls back only its part`,
    );
  };
  const unsafe = (query: unknown, ...rest: unknown[]) => {
    // A String object (or anything postgres.js would turn into text) is read once, as text, and
    // that text is what postgres.js runs.
    const text = typeof query === "object" && query !== null ? String(query) : query;
    if (typeof text === "string") check(text);
    else live();
    return (tx as unknown as { unsafe: PgQuery }).unsafe(text, ...rest);
  };
  // A file of SQL is read by postgres.js after this returns: its text could not be checked.
  const file = () => {
    live();
    throw new Error(
      "flag-webhooks: refused through the inbox's tx: tx.file(): the inbox cannot read a file's statements before postgres.js runs them; read the file and send its text with tx.unsafe(text)",
    );
  };
  // The other way postgres.js runs statements: a savepoint.
  const guarded = (key: "savepoint") => {
    const method = (tx as unknown as Record<string, PgQuery>)[key];
    return (...args: unknown[]) => {
      live();
      return method?.apply(tx, args);
    };
  };
  return new Proxy(tx, {
    apply(target, self, args: unknown[]) {
      const strings = args[0] as { raw?: unknown } | undefined;
      if (Array.isArray(strings) && Array.isArray(strings.raw)) check(strings.join(" $ "));
      return Reflect.apply(target, self, args);
    },
    get: (target, key) =>
      key === "unsafe" ? unsafe : key === "file" ? file : key === "savepoint" ? guarded(key) : Reflect.get(target, key),
  });
}

/** `target` with `own` in place of its methods of those names; its other methods called on it. */
function forwarding(target: object, own: Record<string, unknown>): unknown {
  return new Proxy(target, {
    get(object, key) {
      if (Object.hasOwn(own, key)) return own[key as string];
      const value = Reflect.get(object, key, object);
      return typeof value === "function" ? value.bind(object) : value;
    },
  });
}
