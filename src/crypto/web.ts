import { bytesOf, type Payload } from "../payload.js";
import type { HmacBackend } from "./backend.js";
import { hexToBytes } from "./hex.js";

const ALGORITHM = { name: "HMAC", hash: "SHA-256" } as const;
// Enough for a few endpoints each mid-rotation; bounded so a caller that derives secrets per
// request cannot grow it without limit.
const MAX_CACHED_KEYS = 32;

export function webBackend(subtle: SubtleCrypto): HmacBackend {
  const encoder = new TextEncoder();
  // importKey costs more than the HMAC of a small body, so keys are imported once per secret.
  const keys = new Map<string, Promise<CryptoKey>>();

  function keyFor(secret: string): Promise<CryptoKey> {
    let key = keys.get(secret);
    if (key === undefined) {
      if (keys.size >= MAX_CACHED_KEYS) keys.delete(keys.keys().next().value as string);
      key = subtle.importKey("raw", encoder.encode(secret), ALGORITHM, false, ["sign", "verify"]);
      keys.set(secret, key);
      key.catch(() => keys.delete(secret));
    }
    return key;
  }

  function dataOf(payload: Payload): Uint8Array<ArrayBuffer> {
    return (typeof payload === "string" ? encoder.encode(payload) : bytesOf(payload)) as Uint8Array<ArrayBuffer>;
  }

  return {
    async sign(secret, payload) {
      const mac = new Uint8Array(await subtle.sign("HMAC", await keyFor(secret), dataOf(payload)));
      return Array.from(mac, (byte) => byte.toString(16).padStart(2, "0")).join("");
    },
    async verify(secret, payload, signature) {
      const expected = hexToBytes(signature);
      const data = dataOf(payload);
      // subtle.verify compares in constant time (WebCrypto spec, "verify" for HMAC).
      if (typeof secret === "string") return subtle.verify("HMAC", await keyFor(secret), expected, data);
      for (const candidate of secret) {
        if (await subtle.verify("HMAC", await keyFor(candidate), expected, data)) return true;
      }
      return false;
    },
  };
}
