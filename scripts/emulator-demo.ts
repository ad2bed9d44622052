// `npm run demo:emulator`: the whole story on the emulator. It starts the Express example and
// the emulator of the feature-flag service, registers the app as a webhook, creates a flag,
// turns it on, rolls it out, and shows each signed delivery arriving as a typed event; then a
// tampered copy refused, a duplicate redelivered, and a deleted webhook that gets nothing more.
// Exits 1 if anything is not as promised.
import type { AddressInfo } from "node:net";
import express from "express";
import { createEmulator, type Delivery } from "flag-webhooks/emulator";
import { createApp } from "../examples/express.js";

let failures = 0;
function check(ok: boolean, what: string): void {
  if (!ok) failures++;
  console.log(`   ${ok ? "✓" : "✗"} ${what}`);
}

// The example app gets its secret from the webhook registration below, as a developer's app would from its config.
let handler: express.Express | undefined;
const server = express()
  .use((req, res, next) => (handler ? handler(req, res, next) : res.sendStatus(503)))
  .listen(0, "127.0.0.1");
await new Promise((resolve) => server.once("listening", resolve));
const appUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;

const emulator = await createEmulator({
  retry: { initialDelayMs: 50 },
  actor: { type: "user", email: "dana@example.com" },
});
console.log(`Emulator of the feature-flag service: API ${emulator.url}, page ${emulator.pageUrl}`);
console.log(`Express example listening on ${appUrl}\n`);

async function api(method: string, path: string, body?: unknown): Promise<unknown> {
  const base = path.startsWith("/_emulator") ? emulator.pageUrl.slice(0, -1) : `${emulator.url}/projects/demo`;
  const response = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${emulator.token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return text ? JSON.parse(text) : { status: response.status };
}

/** Runs a step, waits for its deliveries, and prints each one with the app's answer. */
async function step(title: string, action: () => Promise<unknown>): Promise<Delivery[]> {
  console.log(`→ ${title}`);
  const before = new Set(emulator.deliveries().map((d) => d.id));
  await action();
  await emulator.settled();
  const sent = emulator.deliveries().filter((d) => !before.has(d.id));
  for (const delivery of sent) {
    const attempt = delivery.attempts.at(-1);
    const kind = delivery.kind === "event" ? "" : ` (${delivery.kind})`;
    console.log(
      `   ${delivery.event.type} ${delivery.event.environment}${kind} ← ${attempt?.status ?? attempt?.error} ${attempt?.responseBody ?? ""}`,
    );
  }
  if (sent.length === 0) console.log("   (no delivery)");
  return sent;
}

const answer = (delivery: Delivery | undefined) => JSON.parse(delivery?.attempts.at(-1)?.responseBody || "{}");

const webhook = (await api("POST", "/webhooks", {
  url: appUrl,
  events: ["flag.created", "flag.updated", "rollout.step"],
})) as { id: string; secret: string };
handler = createApp(webhook.secret);
console.log(`→ registered the app as webhook ${webhook.id}; its secret went to the app (never printed)\n`);

const created = await step("create the flag new-checkout (switched off in every environment)", () =>
  api("POST", "/flags", { key: "new-checkout", type: "boolean" }),
);
check(
  created.length === 3 && created.every((d) => d.state === "succeeded"),
  "one signed flag.created per environment, each accepted",
);

const [on] = await step("turn it on in production", () =>
  api("PATCH", "/flags/new-checkout", { environment: "production", on: true }),
);
check(
  answer(on).summary === "dana@example.com changed new-checkout in production (on: false → true)",
  "the app received a typed flag.updated with its changes and actor",
);

const [rollout] = await step("roll it out to 25% in production", () =>
  api("PATCH", "/flags/new-checkout", { environment: "production", rollout: { percent: 25 } }),
);
check(
  answer(rollout).summary?.includes("rollout.percent: null → 25") === true,
  "the change is rollout.percent null → 25",
);

const [advanced] = await step("the scheduled rollout advances to 50%", () =>
  api("POST", "/_emulator/projects/demo/flags/new-checkout/rollout-step", { environment: "production", percent: 50 }),
);
check(advanced?.state === "succeeded", "rollout.step delivered");

const [tampered] = await step("send a tampered copy of the flag.updated (body changed, signature kept)", () =>
  api("POST", `/_emulator/deliveries/${on?.id}/tampered-copy`),
);
check(answer(tampered).error?.code === "invalid_signature", "the app refused it with 401 invalid_signature");

const [duplicate] = await step("redeliver the flag.updated (the same event again, as after a lost answer)", () =>
  api("POST", `/_emulator/deliveries/${on?.id}/redeliver`),
);
check(
  answer(duplicate).received === answer(on).received,
  `the duplicate carries the same event id ${answer(on).received}: a receiver with dedupe handles it once`,
);

await api("DELETE", `/webhooks/${webhook.id}`);
const after = await step(`delete webhook ${webhook.id}, then turn the flag off`, () =>
  api("PATCH", "/flags/new-checkout", { environment: "production", on: false }),
);
check(after.length === 0, "a deleted webhook gets nothing more");

await emulator.close();
server.close();
console.log(failures === 0 ? "\nEverything happened as promised." : `\n${failures} step(s) were not as promised.`);
process.exit(failures === 0 ? 0 : 1);
