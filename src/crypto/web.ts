import { bytesOf, type Payload } from "../payload.js";
import type { HmacBackend } from "./backend.js";
import { keyCache } from "./key-cache.js";

const ALGORITHM = { name: "HMAC", hash: "SHA-256" } as const;

export function webBackend(subtle: SubtleCrypto): HmacBackend {
  const encoder = new TextEncoder();
  // importKey costs more than the HMAC of a small body, so each secret is imported once; the
  // resolved key is kept too, so later calls skip an await.
  const keyFor = keyCache((secret) =>
    subtle.importKey("raw", encoder.encode(secret), ALGORITHM, false, ["sign", "verify"]),
  );

  function dataOf(payload: Payload): Uint8Array<ArrayBuffer> {
    return (typeof payload === "string" ? encoder.encode(payload) : bytesOf(payload)) as Uint8Array<ArrayBuffer>;
  }

  return {
    async sign(secret, payload) {
      const mac = new Uint8Array(await subtle.sign("HMAC", await keyFor(secret), dataOf(payload)));
      return Array.from(mac, (byte) => byte.toString(16).padStart(2, "0")).join("");
    },
    async verify(secret, payload, signature) {
      // The caller checked /^[0-9a-f]{64}$/, so every pair is a hex byte. (Speed matters little
      // here: a Web Crypto call costs far more than this decode.)
      const expected = Uint8Array.from(signature.match(/../g) as string[], (byte) => Number.parseInt(byte, 16));
      const data = dataOf(payload);
      // subtle.verify compares in constant time (WebCrypto spec, "verify" for HMAC).
      const candidates = typeof secret === "string" ? [secret] : secret;
      for (let index = 0; index < candidates.length; index++) {
        if (await subtle.verify("HMAC", await keyFor(candidates[index] as string), expected, data)) return index;
      }
      return -1;
    },
  };
}
