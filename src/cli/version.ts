// tsup replaces this name with package.json's version when it builds dist/cli.js.
declare const __FLAG_WEBHOOKS_VERSION__: string | undefined;

/** The package's version; "0.0.0-dev" when run from source. */
export const VERSION: string = typeof __FLAG_WEBHOOKS_VERSION__ === "string" ? __FLAG_WEBHOOKS_VERSION__ : "0.0.0-dev";
