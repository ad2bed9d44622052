// Runs inside a temporary project that has the packed tarball installed, under each Node major.
// Prints one JSON line that package.test.ts checks.
import { createRequire } from "node:module";
import * as esm from "flag-webhooks";
import * as express from "flag-webhooks/express";
import * as fastify from "flag-webhooks/fastify";
import * as fetchAdapter from "flag-webhooks/fetch";
import * as hono from "flag-webhooks/hono";
import * as koa from "flag-webhooks/koa";
import * as lambda from "flag-webhooks/lambda";

const require = createRequire(import.meta.url);
const [secret, body, signature] = JSON.parse(process.argv[2]);

const verified = await esm.verifySignature({ secret, payload: Buffer.from(body, "hex"), signature });
const event = await esm.verifyEvent({ secret, payload: Buffer.from(body, "hex"), signature });
const thrown = await esm.verifyEvent({ secret, payload: "x", signature: "0".repeat(64) }).catch((e) => e);
const cjs = require("flag-webhooks");
const request = new Request("http://x/", { method: "POST", body: "{}", headers: { "service-signature": signature } });
const fromAdapter = await fetchAdapter.verifyRequest(request, { secret }).catch((e) => e);
// A function URL event with a base64 body, as Lambda would pass it.
const lambdaEvent = {
  requestContext: { http: { method: "POST" } },
  headers: { "service-signature": signature },
  body: Buffer.from(body, "hex").toString("base64"),
  isBase64Encoded: true,
};
const lambdaResult = await lambda.webhookHandler({ secret, onEvent() {} })(lambdaEvent, {});

console.log(
  JSON.stringify({
    node: process.version,
    exports: Object.keys(esm).sort(),
    adapters: [express, koa, fetchAdapter, fastify, hono, lambda].map((m) => Object.keys(m).sort().join(",")),
    lambdaStatus: lambdaResult.statusCode,
    verified,
    type: event.type,
    code: thrown.code,
    instanceofImport: thrown instanceof esm.WebhookError,
    instanceofRequire: thrown instanceof cjs.WebhookError,
    adapterError: fromAdapter.code,
    adapterInstanceofImport: fromAdapter instanceof esm.WebhookError,
    adapterInstanceofRequire: fromAdapter instanceof cjs.WebhookError,
  }),
);
