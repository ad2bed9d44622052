#!/usr/bin/env node
// `npm run fuzz`: the property tests' long run, over the built package. Counts every input tried,
// every false accept (a signature that verified but should not have) and every foreign exception
// (anything thrown but our WebhookError for bad input). Both must be 0; exits 1 otherwise.
// FUZZ_RUNS sets the inputs per property (default 250,000 × 4 properties = 1,000,000).
import { createHmac } from "node:crypto";
import fc from "fast-check";
import { parseEvent, verifySignature, WebhookError } from "../dist/index.js";

const runs = Number(process.env.FUZZ_RUNS ?? 250_000);
const totals = { tried: 0, falseAccepts: 0, foreignExceptions: 0 };
const hmac = (secret, payload) => createHmac("sha256", secret).update(payload).digest();
const secrets = fc.string({ unit: "binary", minLength: 1, maxLength: 64 });
const bodies = fc.uint8Array({ maxLength: 1024 });

async function count(name, arbitrary, check) {
  const started = Date.now();
  const before = { ...totals };
  await fc.check(
    fc.asyncProperty(arbitrary, async (input) => {
      totals.tried++;
      try {
        if ((await check(input)) === "accepted") totals.falseAccepts++;
      } catch (error) {
        if (!(error instanceof WebhookError)) {
          totals.foreignExceptions++;
          if (totals.foreignExceptions <= 5) console.error(name, error);
        }
      }
      return true;
    }),
    { numRuns: runs },
  );
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(
    `${name}: ${totals.tried - before.tried} inputs, ${totals.falseAccepts - before.falseAccepts} false accepts, ` +
      `${totals.foreignExceptions - before.foreignExceptions} foreign exceptions (${seconds}s)`,
  );
}

// 1. Arbitrary headers, including near-misses of the right digest, against a random body.
await count(
  "arbitrary signature headers",
  fc.tuple(
    secrets,
    bodies,
    fc.oneof(fc.string({ unit: "binary", maxLength: 100 }), fc.stringMatching(/^[0-9a-fA-F]{62,66}$/), fc.anything()),
  ),
  async ([secret, payload, signature]) =>
    (await verifySignature({ secret, payload, signature })) && signature !== hmac(secret, payload).toString("hex")
      ? "accepted"
      : "ok",
);

// 2. The right signature with one bit of the body flipped.
await count(
  "one bit of the body flipped",
  fc.tuple(
    secrets,
    bodies.filter((b) => b.length > 0),
    fc.nat(),
  ),
  async ([secret, payload, n]) => {
    const signature = hmac(secret, payload).toString("hex");
    const flipped = Uint8Array.from(payload);
    const bit = n % (flipped.length * 8);
    flipped[bit >> 3] ^= 1 << (bit & 7);
    return (await verifySignature({ secret, payload: flipped, signature })) ? "accepted" : "ok";
  },
);

// 3. The right body with one bit of the signature flipped.
await count(
  "one bit of the signature flipped",
  fc.tuple(secrets, bodies, fc.nat(255)),
  async ([secret, payload, bit]) => {
    const digest = hmac(secret, payload);
    digest[bit >> 3] ^= 1 << (bit & 7);
    return (await verifySignature({ secret, payload, signature: digest.toString("hex") })) ? "accepted" : "ok";
  },
);

// 4. Arbitrary authentic bodies: an event or invalid_payload, never another exception.
await count("arbitrary bodies parsed", fc.oneof(fc.uint8Array({ maxLength: 512 }), fc.json()), async (payload) => {
  parseEvent(payload);
  return "ok";
});

console.log(
  `\ntotal: ${totals.tried} inputs tried, ${totals.falseAccepts} false accepts, ${totals.foreignExceptions} foreign exceptions`,
);
process.exit(totals.falseAccepts === 0 && totals.foreignExceptions === 0 ? 0 : 1);
