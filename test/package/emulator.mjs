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
    const html = await fetch(emulator.pageUrl).then((res) => res.text());
    const assets = await Promise.all(["page.js", "page.css"].map((file) => fetch(emulator.pageUrl + file)));
    const created = await fetch(`${emulator.url}/projects/p/flags`, {
      method: "POST",
      headers: { authorization: `Bearer ${emulator.token}`, "content-type": "application/json" },
      body: JSON.stringify({ key: "k", type: "boolean" }),
    });
    results[name] = {
      page: html.includes("<title>flag-webhooks emulator</title>") && html.includes(emulator.token),
      assets: assets.map((res) => res.status),
      created: created.status,
    };
  } finally {
    await emulator.close();
  }
}
console.log(JSON.stringify(results));
