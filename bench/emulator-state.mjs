// The cost of one change to the emulator with a state file, as its delivery history grows (each
// change rewrites the whole file). For each history size it writes a state file holding that
// many finished deliveries (each the size of a real one), starts the emulator from it, makes CHANGES flag
// changes through the API (each one delivery to a receiver on loopback), and counts the bytes the
// emulator writes (fs.writeSync, wrapped) and the wall time per change. The bounded history
// (maxDeliveries, default 1000) is compared with an unbounded one (the old behaviour).
//
//   npx tsup && node bench/emulator-state.mjs          # ~1 minute
import { randomBytes } from "node:crypto";
import fs, { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEmulator } from "../dist/emulator.js";

const CHANGES = Number(process.env.CHANGES ?? 300);
const SIZES = [0, 1_000, 10_000, 100_000];

let bytes = 0;
let writes = 0;
const writeSync = fs.writeSync;
fs.writeSync = (fd, buffer, ...rest) => {
  const written = writeSync(fd, buffer, ...rest);
  bytes += written;
  writes++;
  return written;
};
syncBuiltinESMExports(); // the emulator's `import { writeSync } from "node:fs"` now counts too

const receiver = createServer((req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(204).end());
});
await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const target = `http://127.0.0.1:${receiver.address().port}/webhooks`;

/** A finished delivery shaped as the emulator records one: about 1 KB of JSON. */
function delivery(n) {
  const id = `evt_${randomBytes(10).toString("hex")}`;
  const body = JSON.stringify({
    id,
    type: "flag.updated",
    createdAt: new Date().toISOString(),
    environment: "staging",
    data: {
      flag: "f",
      changes: [{ path: "on", from: n % 2 === 0, to: n % 2 === 1 }],
      actor: { type: "user", email: "developer@example.com" },
    },
  });
  return {
    id: `dlv_${randomBytes(8).toString("hex")}`,
    kind: "event",
    project: "bench",
    webhookId: "wh_bench",
    url: target,
    event: { id, type: "flag.updated", environment: "staging" },
    createdAt: new Date().toISOString(),
    request: {
      headers: {
        "content-type": "application/json",
        "service-signature": randomBytes(32).toString("hex"),
        "user-agent": "flag-webhooks-emulator",
      },
      body,
    },
    attempts: [
      {
        number: 1,
        startedAt: new Date().toISOString(),
        durationMs: 1.2,
        status: 204,
        responseHeaders: { date: new Date().toUTCString(), connection: "keep-alive", "keep-alive": "timeout=5" },
        responseBody: "",
      },
    ],
    state: "succeeded",
  };
}

async function run(history, maxDeliveries) {
  const dir = mkdtempSync(join(tmpdir(), "emulator-bench-"));
  const stateFile = join(dir, "state.json");
  const token = `fwe_${randomBytes(18).toString("base64url")}`;
  const flag = {
    flag: {
      key: "f",
      name: "f",
      type: "boolean",
      variations: [true, false],
      permanent: false,
      tags: [],
      environments: { production: { on: false }, staging: { on: false }, development: { on: false } },
      createdAt: new Date().toISOString(),
    },
    seq: 1,
    updatedAt: new Date().toISOString(),
  };
  const webhook = {
    id: "wh_bench",
    url: target,
    events: ["flag.updated"],
    secret: `whsec_${randomBytes(24).toString("hex")}`,
    createdAt: new Date().toISOString(),
  };
  const deliveries = Array.from({ length: history }, (_, n) => delivery(n));
  writeFileSync(
    stateFile,
    JSON.stringify({
      version: 1,
      token,
      seq: 1,
      projects: [{ id: "bench", flags: [flag], webhooks: [webhook] }],
      deliveries,
    }),
  );
  const emulator = await createEmulator({ stateFile, maxDeliveries, retry: { attempts: 1 } });
  bytes = 0;
  writes = 0;
  const started = performance.now();
  for (let n = 0; n < CHANGES; n++) {
    const response = await fetch(`${emulator.url}/projects/bench/flags/f`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ environment: "staging", on: n % 2 === 0 }),
    });
    await response.arrayBuffer();
    await emulator.settled();
  }
  await emulator.close(); // the last write included
  const ms = performance.now() - started;
  const result = {
    history,
    bound: maxDeliveries === Number.MAX_SAFE_INTEGER ? "none" : String(maxDeliveries),
    kept: emulator.deliveries().length,
    msPerChange: (ms / CHANGES).toFixed(2),
    kbWrittenPerChange: (bytes / CHANGES / 1024).toFixed(1),
    writes,
    stateFileKb: (statSync(stateFile).size / 1024).toFixed(0),
  };
  rmSync(dir, { recursive: true, force: true });
  return result;
}

const rows = [];
for (const history of SIZES) rows.push(await run(history, 1000));
// The old behaviour, for comparison (every delivery kept); 100,000 takes too long to be worth it.
for (const history of SIZES.slice(0, 3)) rows.push(await run(history, Number.MAX_SAFE_INTEGER));
receiver.close();

console.log(`${CHANGES} changes each, one delivery per change, after a history of N deliveries:\n`);
console.log("| history N | bound | kept after | ms per change | KiB written per change | writes | state file KiB |");
console.log("| --------: | ----: | ---------: | ------------: | ---------------------: | -----: | -------------: |");
for (const r of rows) {
  console.log(
    `| ${r.history} | ${r.bound} | ${r.kept} | ${r.msPerChange} | ${r.kbWrittenPerChange} | ${r.writes} | ${r.stateFileKb} |`,
  );
}
