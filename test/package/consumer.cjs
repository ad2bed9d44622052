// The CommonJS twin of consumer.mjs, run with --no-experimental-require-module so it proves a
// real CommonJS build rather than Node's require() of ES modules.
const cjs = require("flag-webhooks");

const [secret, body, signature] = JSON.parse(process.argv[2]);

(async () => {
  const verified = await cjs.verifySignature({ secret, payload: Buffer.from(body, "hex"), signature });
  const event = await cjs.verifyEvent({ secret, payload: Buffer.from(body, "hex"), signature });
  const thrown = await cjs.verifyEvent({ secret, payload: "x", signature: undefined }).catch((e) => e);
  const esm = await import("flag-webhooks");
  console.log(
    JSON.stringify({
      node: process.version,
      exports: Object.keys(cjs).sort(),
      verified,
      type: event.type,
      code: thrown.code,
      instanceofImport: thrown instanceof esm.WebhookError,
      instanceofRequire: thrown instanceof cjs.WebhookError,
    }),
  );
})();
