// The CommonJS twin of consumer.mjs, run with --no-experimental-require-module so it proves a
// real CommonJS build rather than Node's require() of ES modules.
const cjs = require("flag-webhooks");
const express = require("flag-webhooks/express");
const koa = require("flag-webhooks/koa");
const fetchAdapter = require("flag-webhooks/fetch");
const fastify = require("flag-webhooks/fastify");
const hono = require("flag-webhooks/hono");
const lambda = require("flag-webhooks/lambda");

const [secret, body, signature] = JSON.parse(process.argv[2]);

(async () => {
  const verified = await cjs.verifySignature({ secret, payload: Buffer.from(body, "hex"), signature });
  const event = await cjs.verifyEvent({ secret, payload: Buffer.from(body, "hex"), signature });
  const thrown = await cjs.verifyEvent({ secret, payload: "x", signature: undefined }).catch((e) => e);
  const esm = await import("flag-webhooks");
  const request = new Request("http://x/", { method: "POST", body: "{}", headers: { "service-signature": signature } });
  const fromAdapter = await fetchAdapter.verifyRequest(request, { secret }).catch((e) => e);
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
      exports: Object.keys(cjs).sort(),
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
})();
