// The postgres entry of the packed package, with neither pg nor postgres installed (it imports
// neither): loads through import and require, and answers 503 when Postgres is unreachable, as
// a WebhookError of the core's.
import { createRequire } from "node:module";
import * as esm from "flag-webhooks/postgres";

const require = createRequire(import.meta.url);
const cjs = require("flag-webhooks/postgres");
const { WebhookError } = require("flag-webhooks");
// A client of the InboxClient shape whose database is down.
const down = {
  transaction: () => Promise.reject(new Error("connect ECONNREFUSED")),
  query: () => Promise.reject(new Error("connect ECONNREFUSED")),
};
const inbox = new cjs.PostgresInbox(down, { scope: "consumer" });
const error = await inbox
  .handle(() => {})({ id: "evt_1" })
  .catch((e) => e);
let scopeError = "";
try {
  new esm.PostgresInbox(down, {});
} catch (e) {
  scopeError = e instanceof TypeError ? "TypeError" : String(e);
}
console.log(
  JSON.stringify({
    esm: Object.keys(esm).sort(),
    cjs: Object.keys(cjs).sort(),
    code: error.code,
    status: error.status,
    instanceofRequire: error instanceof WebhookError,
    scopeError,
  }),
);
