// flag-webhooks/sqlite: the transactional inbox on SQLite, whose handler's writes commit with the
// event id once the receiver has decided the delivery was handled. No runtime import of any
// driver: node:sqlite, better-sqlite3, bun:sqlite, @libsql/client, a D1 binding or a Durable
// Object's storage is recognised by its shape, and its types are inferred from the one passed.

export type {
  AttemptInfo,
  EnqueueOptions,
  InboxCounts,
  InboxState,
  InboxWorker,
  KeepOptions,
  KeptEvent,
  KeptHandler,
  PurgeTarget,
  ReplayTarget,
  WorkOptions,
} from "../work/types.js";
export { SqliteInbox } from "./inbox.js";
export type {
  D1Like,
  DurableObjectSqlLike,
  InboxHandler,
  InboxStatements,
  InboxTransaction,
  SqliteAsyncClient,
  SqliteAsyncTransaction,
  SqliteConnection,
  SqliteDatabase,
  SqliteInboxOptions,
  SqliteRow,
  SqlStatement,
} from "./types.js";
