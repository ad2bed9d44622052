import type { HmacBackend } from "./backend.js";
import { type NodeBuffer, type NodeCrypto, nodeBackend } from "./node.js";
import { webBackend } from "./web.js";

interface NodeProcess {
  process: { getBuiltinModule(id: string): unknown };
}

/**
 * Picks the HMAC implementation once, at load. `node:crypto` is several times faster than Web
 * Crypto on Node (a Web Crypto call is a thread-pool round trip), so it is used wherever the
 * runtime offers it through `process.getBuiltinModule` (Node >= 20.16, Bun, Deno, Workers with
 * nodejs_compat). Asking at run time instead of importing `node:crypto` keeps the core loadable
 * on runtimes without Node built-ins (Workers without compatibility flags) and in bundlers.
 */
function selectBackend(): HmacBackend {
  try {
    // Throws where there is no process or no getBuiltinModule: then Web Crypto it is.
    const { process } = globalThis as unknown as NodeProcess;
    const crypto = process.getBuiltinModule("node:crypto") as Partial<NodeCrypto>;
    const buffer = process.getBuiltinModule("node:buffer") as Partial<NodeBuffer>;
    if (crypto.createHmac && crypto.createSecretKey && crypto.timingSafeEqual && buffer.Buffer) {
      return nodeBackend(crypto as NodeCrypto, buffer as NodeBuffer);
    }
  } catch {
    // A runtime without node:crypto, or one that refuses it, gets Web Crypto.
  }
  return webBackend(globalThis.crypto.subtle);
}

export const backend: HmacBackend = selectBackend();
