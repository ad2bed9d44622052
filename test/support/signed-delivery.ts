import { createHmac, randomUUID } from "node:crypto";

/**
 * A fresh `flag.updated` delivery signed with `secret`, as the service sends it: the raw JSON body
 * and its headers. Each call has a new event id, so dedupe cases never meet another test's id.
 */
export function signedDelivery(secret: string): { body: string; headers: Record<string, string> } {
  const body = JSON.stringify({
    id: `evt_${randomUUID()}`,
    type: "flag.updated",
    createdAt: new Date().toISOString(),
    environment: "production",
    data: { flag: "f", changes: [], actor: { type: "user", email: "a@example.com" } },
  });
  const headers = {
    "content-type": "application/json",
    "service-signature": createHmac("sha256", secret).update(body).digest("hex"),
  };
  return { body, headers };
}
