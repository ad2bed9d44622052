import { inboxSchema as postgresSchema } from "../stores/postgres/schema.js";
import { inboxSchema as sqliteSchema } from "../stores/sqlite/schema.js";
import { type Command, UsageError } from "./command.js";
import { VERSION } from "./version.js";

// Prints the statements migrate() runs, from the same list, for a migration tool (wrangler d1
// migrations, a Postgres migration file) where the app cannot or should not create tables as it
// starts.

const STORES = {
  sqlite: { schema: sqliteSchema, name: "SqliteInbox" },
  postgres: { schema: postgresSchema, name: "PostgresInbox" },
} as const;

export const schemaCommand: Command = {
  name: "schema",
  summary: "Print the SQL that creates an inbox's table, for a migration file",
  usage: "flag-webhooks schema <sqlite|postgres> [options]",
  description:
    "Prints the statements the inbox's migrate() runs, as SQL for a migration file: on D1, put it in\n" +
    "a `wrangler d1 migrations` file instead of calling migrate() in the Worker. Every statement\n" +
    "creates only what is missing, so the file can run on a database migrate() already made.",
  options: {
    table: {
      type: "string",
      valueName: "name",
      default: "flag_webhooks_inbox",
      description: 'The inbox\'s table, as in its "table" option (optionally "schema.table")',
    },
  },
  examples: [
    "flag-webhooks schema sqlite > migrations/0001_flag_webhooks_inbox.sql",
    "flag-webhooks schema postgres --table app.webhook_inbox",
  ],
  async run({ values, positionals, stdout }) {
    const [store, ...extra] = positionals;
    if (store === undefined) throw new UsageError("missing the store: sqlite or postgres");
    if (extra.length > 0) throw new UsageError(`expected one store, got ${positionals.length} arguments`);
    if (store !== "sqlite" && store !== "postgres") {
      throw new UsageError(`unknown store "${store}"; use sqlite or postgres`);
    }
    const { schema, name } = STORES[store];
    let statements: readonly string[];
    try {
      ({ statements } = schema(String(values.table)));
    } catch {
      throw new UsageError(`--table must be a table name, optionally "schema.table", got "${values.table}"`);
    }
    const header = `-- flag-webhooks ${VERSION}: the ${name}'s table, as its migrate() creates it.\n`;
    stdout.write(`${header}\n${statements.map((statement) => `${statement};\n`).join("\n")}`);
    return 0;
  },
};
