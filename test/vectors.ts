import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** One known-answer case from ../shared/vectors/signatures.json, computed with openssl. */
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

/**
 * ../shared sits beside the repository; look upward for it, so the suite also runs from a copy
 * of the repository nested deeper (Stryker's sandbox).
 */
function findVectors(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, "shared/vectors/signatures.json");
    if (existsSync(candidate)) return candidate;
    const parent = dirname(dir);
    if (parent === dir) throw new Error("shared/vectors/signatures.json not found beside the repository");
    dir = parent;
  }
}

const file = findVectors();

/** The shared vectors with their bodies as bytes (body_hex is authoritative). */
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
