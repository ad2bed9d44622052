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
  createSecretKey(key: Uint8Array): SecretKey;
  timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean;
}

interface ScratchBuffer extends Uint8Array {
  write(text: string, offset: number, length: number, encoding: "latin1"): number;
}
export interface NodeBuffer {
  Buffer: { alloc(size: number): ScratchBuffer; from(text: string): Uint8Array };
}

export function nodeBackend(crypto: NodeCrypto, { Buffer }: NodeBuffer): HmacBackend {
  const { createHmac, timingSafeEqual } = crypto;
  // A KeyObject per secret spares createHmac re-encoding the secret on every call. The secret is
  // used as its UTF-8 bytes (Buffer.from's default), as Web Crypto and every other signer use it.
  const keyFor = keyCache((secret) => crypto.createSecretKey(Buffer.from(secret)));
  // The header and the digest are compared as their hex text, written into two buffers kept for
  // the purpose: digest("hex") is much cheaper in Node than digest() (which allocates a Buffer of
  // its own), and writing both texts into these saves the allocation of a hex decode. Both are
  // exactly 64 lowercase hex characters (the caller checked the header's format), so equal text
  // means equal bytes. The digest is computed first, and only then are both buffers written and
  // compared, with no call in between that could run other code: reading a payload view may run
  // a getter, which may verify another delivery and so use these buffers itself (reentrancy).
  const header = Buffer.alloc(64);
  const computed = Buffer.alloc(64);

  function hmac(secret: string, payload: Payload): Hmac {
    // hmac.update takes a string as UTF-8 directly, saving a copy into a Uint8Array.
    return createHmac("sha256", keyFor(secret)).update(typeof payload === "string" ? payload : bytesOf(payload));
  }

  /** Whether `signature` is the HMAC of `payload` under `secret`, compared in constant time. */
  function matches(secret: string, payload: Payload, signature: string): boolean {
    const digest = hmac(secret, payload).digest("hex");
    // Both texts are ASCII, which UTF-8 (the default) writes alike; latin1 writes them faster.
    // Stryker disable next-line StringLiteral: "" is UTF-8, which writes ASCII alike
    header.write(signature, 0, 64, "latin1");
    // Stryker disable next-line StringLiteral: as above
    computed.write(digest, 0, 64, "latin1");
    return timingSafeEqual(computed, header);
  }

  return {
    async sign(secret, payload) {
      return hmac(secret, payload).digest("hex");
    },
    verify(secret, payload, signature) {
      if (typeof secret === "string") return matches(secret, payload, signature) ? 0 : -1;
      for (let index = 0; index < secret.length; index++) {
        if (matches(secret[index] as string, payload, signature)) return index;
      }
      return -1;
    },
  };
}
