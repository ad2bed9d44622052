import { vi } from "vitest";

type Core = typeof import("flag-webhooks");

/**
 * The core as a user gets it, once per HMAC implementation: as Node loads it (node:crypto), and
 * as a runtime without `process.getBuiltinModule` loads it (Workers, older Node), where the
 * same public functions must run on Web Crypto. Each load is a fresh instance, with empty caches.
 */
export const backends: { name: string; load: () => Promise<Core> }[] = [
  {
    name: "node:crypto",
    async load() {
      vi.resetModules();
      try {
        return await import("flag-webhooks");
      } finally {
        vi.resetModules();
      }
    },
  },
  {
    name: "Web Crypto",
    async load() {
      vi.resetModules();
      const original = process.getBuiltinModule;
      (process as { getBuiltinModule?: unknown }).getBuiltinModule = undefined;
      try {
        return await import("flag-webhooks");
      } finally {
        process.getBuiltinModule = original;
        vi.resetModules();
      }
    },
  },
];
