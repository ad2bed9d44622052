// The emulator's HTTP answers at their edges, on a real node:http server: an error after the
// headers went out, and the page's one templated value, escaped.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ApiError } from "../../src/emulator/api-error.js";
import { sendError } from "../../src/emulator/http.js";
import { type PageFile, pageFile, servePage } from "../../src/emulator/page.js";

let server: Server | undefined;

afterEach(async () => {
  const open = server;
  server = undefined;
  open?.closeAllConnections();
  if (open) await new Promise((resolve) => open.close(resolve));
});

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  server = createServer(handler);
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

describe("sendError", () => {
  it("ends the connection, without throwing, when the headers went out before the error", async () => {
    let thrown: unknown = "not called";
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("half an answer");
      try {
        sendError(res, new ApiError(400, "invalid_request", "too late"));
        thrown = undefined;
      } catch (error) {
        thrown = error;
        res.destroy();
      }
    });
    // The client sees the answer cut short (here before even its headers reach it).
    await expect(fetch(url).then((answer) => answer.text())).rejects.toThrow();
    expect(thrown).toBeUndefined();
  });

  it("answers any other error 500, saying nothing of its cause", async () => {
    const url = await serve((_req, res) => sendError(res, new Error("ENOENT /home/me/secret-file")));
    const answer = await fetch(url);
    expect([answer.status, await answer.json()]).toEqual([
      500,
      { error: { code: "internal_error", message: "the emulator failed to handle this request" } },
    ]);
  });

  it("answers an ApiError with its status, headers and spec section 7's body", async () => {
    const url = await serve((_req, res) =>
      sendError(res, new ApiError(405, "method_not_allowed", "no", { allow: "GET" })),
    );
    const answer = await fetch(url);
    expect([answer.status, answer.headers.get("allow"), await answer.json()]).toEqual([
      405,
      "GET",
      { error: { code: "method_not_allowed", message: "no" } },
    ]);
  });
});

describe("servePage", () => {
  it("puts the API's URL into the page HTML-escaped, so no URL can add markup", async () => {
    const page = pageFile("/") as PageFile;
    const url = await serve((_req, res) => servePage(page, res, { url: `http://x/"'<b>&` }));
    const html = await (await fetch(url)).text();
    expect(html).toContain('content="http://x/&#34;&#39;&#60;b&#62;&#38;"');
    expect(html).not.toContain("<b>");
    expect(html).not.toContain("{{url}}");
  });

  it("knows only the page's three files", () => {
    expect(["/", "/page.css", "/page.js", "/index.html", "/x"].map((path) => pageFile(path)?.file)).toEqual([
      "index.html",
      "page.css",
      "page.js",
      undefined,
      undefined,
    ]);
  });
});
