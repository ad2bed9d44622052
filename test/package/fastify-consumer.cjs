// The CommonJS twin of fastify-consumer.mjs (over HTTP: Fastify's inject() needs require() of ES modules).
const Fastify = require("fastify");
const { webhookPlugin } = require("flag-webhooks/fastify");

const [secret, body, signature] = JSON.parse(process.argv[2]);

(async () => {
  const app = Fastify();
  app.post("/json", async (request) => request.body);
  await app.register(webhookPlugin, {
    path: "/webhooks",
    secret,
    onEvent: (event, request) => ({
      status: 200,
      body: { type: event.type, onRequest: request.webhookEvent === event },
    }),
  });
  const base = await app.listen({ port: 0, host: "127.0.0.1" });
  const deliver = async (sig) => {
    const res = await fetch(`${base}/webhooks`, {
      method: "POST",
      headers: { "service-signature": sig, "content-type": "application/json" },
      body: Buffer.from(body, "hex"),
    });
    return [res.status, await res.json()];
  };
  const ok = await deliver(signature);
  const bad = await deliver("0".repeat(64));
  const json = await fetch(`${base}/json`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: '{"a":1}',
  }).then((res) => res.json());
  await app.close();
  console.log(JSON.stringify({ ok, bad: [bad[0], bad[1].error.code], json }));
})();
