// A Lambda function behind an HTTP API or a function URL whose deliveries are handled once across
// every instance of it: the claims live in DynamoDB. Deploy with template.yaml (SAM), which makes
// the table and passes its name as DEDUPE_TABLE. Cold starts, timeouts and the sender's retries
// all land here; a copy that arrives while another instance runs it gets 409 (retry later), one
// that arrives after gets 204 with `webhook-duplicate: true`.
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createRouter } from "flag-webhooks";
import { DynamoDBDedupeStore } from "flag-webhooks/dynamodb";
import { webhookHandler } from "flag-webhooks/lambda";

// Made once per execution environment, outside the handler, so warm invocations reuse the client.
const store = new DynamoDBDedupeStore(new DynamoDBClient({}), {
  table: process.env.DEDUPE_TABLE ?? "",
  scope: "flag-audit",
});

const router = createRouter()
  .on("flag.updated", (event) => {
    console.log(JSON.stringify({ audit: event.id, flag: event.data.flag, changes: event.data.changes.length }));
  })
  .on(["flag.created", "flag.deleted"], (event) => {
    console.log(JSON.stringify({ audit: event.id, type: event.type }));
  });

export const handler = webhookHandler({
  secret: process.env.WEBHOOK_SECRET ?? "",
  maxAge: "5m",
  dedupe: { store, ttl: "24h" },
  onEvent: router,
});
