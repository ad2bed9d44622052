// flag-webhooks/postgres: the transactional inbox, whose handler's writes commit with the event id,
// once the receiver has decided the delivery was handled. No runtime import of any Postgres
// client: `pg` (Pool or Client), postgres.js, or any client behind InboxClient is recognised by
// its shape, and their types are inferred from the client the user passes.

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
export { PostgresInbox } from "./inbox.js";
export type {
  InboxClient,
  InboxHandler,
  InboxRow,
  InboxTransaction,
  PostgresClient,
  PostgresInboxOptions,
} from "./types.js";
