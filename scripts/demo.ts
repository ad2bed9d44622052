// `npm run demo`: starts the Express example on a free loopback port, sends it real signed
// deliveries over HTTP, and prints what the receiver saw and answered. Exits 1 if any answer
// differs from what the library promises.
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { SIGNATURE_HEADER, sign } from "flag-webhooks";
import { createApp } from "../examples/express.js";

const secret = randomBytes(24).toString("hex"); // a fresh secret each run; never printed
const app = createApp(secret);
const server = app.listen(0, "127.0.0.1");
await new Promise((resolve) => server.once("listening", resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
console.log(`Express example listening on ${url}\n`);

const event = {
  id: "evt_demo_1",
  type: "flag.updated",
  createdAt: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
  environment: "production",
  data: {
    flag: "new-checkout",
    changes: [{ path: "rollout.percent", from: 10, to: 50 }],
    actor: { type: "user", email: "dana@example.com" },
  },
};
const body = JSON.stringify(event);
const signature = await sign({ secret, payload: body });

const deliveries: { what: string; body: string; headers: Record<string, string>; expect: number }[] = [
  { what: "a valid flag.updated delivery", body, headers: { [SIGNATURE_HEADER]: signature }, expect: 200 },
  {
    what: "the same delivery with the body tampered (50 → 90)",
    body: body.replace('"to":50', '"to":90'),
    headers: { [SIGNATURE_HEADER]: signature },
    expect: 401,
  },
  { what: "a delivery with no signature header", body, headers: {}, expect: 401 },
  {
    what: "a signed body of 1 MiB + 1 byte (over the default limit)",
    body: body + " ".repeat(1024 * 1024 + 1 - body.length),
    headers: { [SIGNATURE_HEADER]: await sign({ secret, payload: body + " ".repeat(1024 * 1024 + 1 - body.length) }) },
    expect: 413,
  },
];

let failures = 0;
for (const delivery of deliveries) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...delivery.headers },
    body: delivery.body,
  });
  const answer = await response.text();
  const ok = response.status === delivery.expect;
  if (!ok) failures++;
  console.log(`→ sent ${delivery.what} (${Buffer.byteLength(delivery.body)} bytes)`);
  console.log(`← ${response.status} ${answer}${ok ? "" : `   ✗ expected ${delivery.expect}`}\n`);
}

server.close();
console.log(
  failures === 0 ? "All deliveries were answered as expected." : `${failures} answer(s) were not as expected.`,
);
process.exit(failures === 0 ? 0 : 1);
