// The cloudflare entry of the packed package: it needs no package at all (the bindings are the
// Workers runtime's), so it loads through import and require on Node too.
import { createRequire } from "node:module";
import * as esm from "flag-webhooks/cloudflare";

const require = createRequire(import.meta.url);
const cjs = require("flag-webhooks/cloudflare");
let scope;
try {
  new cjs.DurableObjectDedupeStore({ idFromName() {}, get() {} }, {});
} catch (error) {
  scope = `${error.constructor.name}: ${error.message.slice(0, 80)}`;
}
console.log(JSON.stringify({ esm: Object.keys(esm).sort(), cjs: Object.keys(cjs).sort(), scope }));
