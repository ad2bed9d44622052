// A handler's deadline in the SQLite inbox. The handler holds the connection's one write turn
// while it runs (SQLite has one writer), so a handler that never ends would stop every delivery on
// the file: past its deadline the transaction is rolled back and the turn goes on to the next
// delivery; the late handler's writes through `tx` then fail, and nothing of it commits.
import { withTimeout } from "../../util/timeout.js";
import type { OpenTransaction } from "./drivers.js";

/** `handled`, bounded by `ms`: past it, `open` is rolled back and the delivery fails (500). */
export function withinDeadline<T>(open: OpenTransaction, ms: number, handled: T | PromiseLike<T>): Promise<T> {
  return withTimeout(handled, ms, () => {
    void open.rollback();
    return new Error(`flag-webhooks: the handler did not finish within handlerTimeout (${ms} ms)`);
  });
}
