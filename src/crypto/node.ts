import { bytesOf, type Payload } from "../payload.js";
import type { HmacBackend } from "./backend.js";
import { keyCache } from "./key-cache.js";

// Only the slice of node:crypto and node:buffer used here, so the core builds without Node's types and never
// names `node:*` in an import statement (see src/crypto/index.ts).
interface Hmac {
  update(data: string | Uint8Array): Hmac;
  digest(): Uint8Array;
  digest(encoding: "hex"): string;
}
type SecretKey = object;
export interface NodeCrypto {
  createHmac(algorithm: "sha256", key: SecretKey): Hmac;
  createSecretKey(key: string, encoding: "utf8"): SecretKey;
  timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean;
}

export interface NodeBuffer {
  Buffer: { from(hex: string, encoding: "hex"): Uint8Array };
}

export function nodeBackend(crypto: NodeCrypto, { Buffer }: NodeBuffer): HmacBackend {
  const { createHmac, timingSafeEqual } = crypto;
  // A KeyObject per secret spares createHmac re-encoding the secret on every call.
  const keyFor = keyCache((secret) => crypto.createSecretKey(secret, "utf8"));

  function hmac(secret: string, payload: Payload): Hmac {
    // hmac.update takes a string as UTF-8 directly, saving a copy into a Uint8Array.
    return createHmac("sha256", keyFor(secret)).update(typeof payload === "string" ? payload : bytesOf(payload));
  }

  return {
    async sign(secret, payload) {
      return hmac(secret, payload).digest("hex");
    },
    verify(secret, payload, signature) {
      // Native hex decoding; safe because the caller checked the format strictly first.
      const expected = Buffer.from(signature, "hex");
      // constant-time comparison to prevent timing attacks on the digest
      if (typeof secret === "string") return timingSafeEqual(hmac(secret, payload).digest(), expected) ? 0 : -1;
      for (let index = 0; index < secret.length; index++) {
        if (timingSafeEqual(hmac(secret[index] as string, payload).digest(), expected)) return index;
      }
      return -1;
    },
  };
}
