// The dynamodb entry of the packed package, once the consumer installed @aws-sdk/client-dynamodb
// (its optional peer): loads through import and require, checks its scope, and answers a claim
// against an unreachable endpoint with an error (the receiver's 503) within its timeout.
import { createRequire } from "node:module";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import * as esm from "flag-webhooks/dynamodb";

const require = createRequire(import.meta.url);
const cjs = require("flag-webhooks/dynamodb");
const client = new DynamoDBClient({
  endpoint: "http://127.0.0.1:1",
  region: "local",
  credentials: { accessKeyId: "local", secretAccessKey: "local" },
});
const noScope = (() => {
  try {
    new esm.DynamoDBDedupeStore(client, { table: "dedupe" });
  } catch (error) {
    return error.constructor.name;
  }
})();
const store = new cjs.DynamoDBDedupeStore(client, { table: "dedupe", scope: "consumer", timeout: 500 });
const started = Date.now();
const failed = await store.claim("evt_1", 1000).then(
  () => false,
  () => true,
);
client.destroy();
console.log(
  JSON.stringify({
    esm: Object.keys(esm).sort(),
    cjs: Object.keys(cjs).sort(),
    noScope,
    failed,
    withinTimeout: Date.now() - started < 3000,
    ttl: cjs.dedupeTable.TimeToLiveSpecification.AttributeName,
  }),
);
