import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** One known-answer case from test/fixtures/signatures.json, computed with openssl. */
export interface Vector {
  name: string;
  secret: string;
  signature: string;
  body: Buffer;
}

interface RawVector {
  name: string;
  secret: string;
  signature: string;
  body_hex?: string;
  body_repeat?: { text: string; count: number };
}

// Kept in the repository with the script that makes them (scripts/make-vectors.mjs, openssl).
const file = join(dirname(fileURLToPath(import.meta.url)), "../fixtures/signatures.json");

/** The vectors with their bodies as bytes (body_hex is authoritative). */
export const vectors: Vector[] = (JSON.parse(readFileSync(file, "utf8")).vectors as RawVector[]).map((v) => ({
  name: v.name,
  secret: v.secret,
  signature: v.signature,
  body: v.body_repeat
    ? Buffer.from(v.body_repeat.text.repeat(v.body_repeat.count), "utf8")
    : Buffer.from(v.body_hex ?? "", "hex"),
}));

export function vector(name: string): Vector {
  const found = vectors.find((v) => v.name === name);
  if (!found) throw new Error(`no vector named ${name} in ${file}`);
  return found;
}

/** The event of the compact flag.updated vector, parsed: the sample the core's tests start from. */
export function sampleEvent(): Record<string, any> {
  return JSON.parse(vector("flag-updated-compact").body.toString("utf8"));
}

/** The sample event's JSON, with `edit` applied to a copy of it first. */
export function sampleJson(edit: (event: Record<string, any>) => void = () => {}): string {
  const event = sampleEvent();
  edit(event);
  return JSON.stringify(event);
}
