// The otel entry of the packed package, once the consumer installed @opentelemetry/api (its
// optional peer) and no SDK: loads through import and require, and a receiver with
// `telemetry: openTelemetry()` answers as one without it.
import { createRequire } from "node:module";
import { webhookHandler } from "flag-webhooks/fetch";
import * as esm from "flag-webhooks/otel";

const require = createRequire(import.meta.url);
const cjs = require("flag-webhooks/otel");
const [secret, bodyHex, signature] = JSON.parse(process.argv[2]);
const body = Buffer.from(bodyHex, "hex");
const handler = webhookHandler({ secret, telemetry: cjs.openTelemetry(), onEvent: () => {} });
const post = (sig) =>
  handler(new Request("http://localhost/webhooks", { method: "POST", headers: { "service-signature": sig }, body }));
const [good, bad] = await Promise.all([post(signature), post("0".repeat(64))]);
console.log(
  JSON.stringify({ esm: Object.keys(esm).sort(), cjs: Object.keys(cjs).sort(), statuses: [good.status, bad.status] }),
);
