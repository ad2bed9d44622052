// The packed emulator, through import and through require: it starts, answers its API, and
// serves the page's files that ship in dist/emulator-page.
import { createRequire } from "node:module";
import { createEmulator } from "flag-webhooks/emulator";

const require = createRequire(import.meta.url);
const results = {};
for (const [name, create] of [
  ["import", createEmulator],
  ["require", require("flag-webhooks/emulator").createEmulator],
]) {
  const emulator = await create();
  try {
    const root = new URL("/", emulator.pageUrl).href; // pageUrl carries the token in its fragment
    const html = await fetch(root).then((res) => res.text());
    const assets = await Promise.all(["page.js", "page.css"].map((file) => fetch(root + file)));
    const created = await fetch(`${emulator.url}/projects/p/flags`, {
      method: "POST",
      headers: { authorization: `Bearer ${emulator.token}`, "content-type": "application/json" },
      body: JSON.stringify({ key: "k", type: "boolean" }),
    });
    results[name] = {
      page:
        html.includes("<title>flag-webhooks emulator</title>") &&
        !html.includes(emulator.token) &&
        emulator.pageUrl === `${root}#token=${emulator.token}`,
      assets: assets.map((res) => res.status),
      created: created.status,
    };
  } finally {
    await emulator.close();
  }
}
console.log(JSON.stringify(results));
