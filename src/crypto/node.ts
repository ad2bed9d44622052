import { bytesOf, type Payload } from "../payload.js";
import type { HmacBackend } from "./backend.js";
import { hexToBytes } from "./hex.js";

// Only the slice of node:crypto used here, so the core builds without Node's
// types and never names `node:*` in an import statement (see src/crypto/index.ts).
interface Hmac {
  update(data: string | Uint8Array): Hmac;
  digest(): Uint8Array;
  digest(encoding: "hex"): string;
}
export interface NodeCrypto {
  createHmac(algorithm: "sha256", key: string): Hmac;
  timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean;
}

export function nodeBackend(crypto: NodeCrypto): HmacBackend {
  const { createHmac, timingSafeEqual } = crypto;

  function hmac(secret: string, payload: Payload): Hmac {
    // hmac.update takes a string as UTF-8 directly, saving a copy into a Uint8Array.
    return createHmac("sha256", secret).update(typeof payload === "string" ? payload : bytesOf(payload));
  }

  return {
    async sign(secret, payload) {
      return hmac(secret, payload).digest("hex");
    },
    verify(secret, payload, signature) {
      const expected = hexToBytes(signature);
      if (typeof secret === "string") return timingSafeEqual(hmac(secret, payload).digest(), expected);
      for (const candidate of secret) {
        // constant-time comparison to prevent timing attacks on the digest
        if (timingSafeEqual(hmac(candidate, payload).digest(), expected)) return true;
      }
      return false;
    },
  };
}
