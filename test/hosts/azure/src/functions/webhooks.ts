import { app } from "@azure/functions";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";

const webhooks = webhookHandler({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

// Azure's HttpRequest and HttpResponseInit are not the fetch Request and Response: the request's
// bytes go into a Request unchanged, and the Response's parts come back out.
app.http("webhooks", {
  methods: ["POST"],
  authLevel: "anonymous",
  async handler(request) {
    const { method, headers, url } = request;
    const response = await webhooks(new Request(url, { method, headers, body: await request.arrayBuffer() }));
    return { status: response.status, headers: response.headers, body: await response.text() };
  },
});
