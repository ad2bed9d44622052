#!/usr/bin/env node
// Known-answer signature vectors, computed by openssl rather than by this library, so a reader
// can check that none is hand-made: `node scripts/make-vectors.mjs` rewrites every `signature` in
// test/fixtures/signatures.json from `openssl dgst -sha256 -hmac <secret>` over each body's bytes;
// `--check` changes nothing and exits 1 if any stored signature differs (test/core/vectors.test.ts).
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const file = join(import.meta.dirname, "../test/fixtures/signatures.json");
const check = process.argv.includes("--check");

/** The body's bytes: body_hex is authoritative; body_repeat is `text` repeated `count` times. */
export function bodyOf(vector) {
  if (vector.body_repeat) return Buffer.from(vector.body_repeat.text.repeat(vector.body_repeat.count), "utf8");
  return Buffer.from(vector.body_hex ?? "", "hex");
}

function openssl(secret, body) {
  // The key goes in as an argument, so its UTF-8 bytes are the HMAC key, as the spec says.
  const out = execFileSync("openssl", ["dgst", "-sha256", "-hmac", secret], { input: body, encoding: "utf8" });
  const hex = /([0-9a-f]{64})\s*$/.exec(out.trim());
  if (!hex) throw new Error(`unexpected openssl output: ${out}`);
  return hex[1];
}

const fixture = JSON.parse(readFileSync(file, "utf8"));
const wrong = [];
for (const vector of fixture.vectors) {
  const signature = openssl(vector.secret, bodyOf(vector));
  if (signature !== vector.signature) wrong.push(vector.name);
  vector.signature = signature;
}
if (check) {
  if (wrong.length > 0) {
    console.error(`signatures that differ from openssl: ${wrong.join(", ")}`);
    process.exit(1);
  }
  console.log(`${fixture.vectors.length} vectors match openssl`);
} else {
  writeFileSync(file, `${JSON.stringify(fixture, null, 2)}\n`);
  console.log(`wrote ${fixture.vectors.length} vectors (${wrong.length} changed) to ${file}`);
}
