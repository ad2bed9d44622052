// signedRequest with bytes Request itself refuses: a view of a SharedArrayBuffer.

import { verifySignature } from "flag-webhooks";
import { signedRequest } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";

describe("signedRequest", () => {
  it("sends bytes held in a SharedArrayBuffer, which new Request refuses as a body, signed", async () => {
    const shared = new Uint8Array(new SharedArrayBuffer(2));
    shared.set([0x7b, 0x7d]);
    expect(() => new Request("http://localhost/", { method: "POST", body: shared as never })).toThrow(TypeError);
    const request = await signedRequest({ secret: "s3cr3t-for-tests", body: shared });
    const body = await request.text();
    expect(body).toBe("{}");
    const signature = request.headers.get("service-signature");
    await expect(verifySignature({ secret: "s3cr3t-for-tests", payload: body, signature })).resolves.toBe(true);
  });
});
