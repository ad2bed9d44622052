// Netlify's own local runtime for functions (@netlify/functions-dev, what `netlify dev` serves
// functions with), behind a node:http server: the CLI itself needs a linked site and the network,
// this runtime does not. It builds each function under netlify/functions with zip-it-and-ship-it
// and runs it as Netlify does: v2 functions on their config.path, v1 handlers on
// /.netlify/functions/<name> through a Lambda-style event. Usage: node host.mjs, with PORT and HOST.
import { createServer } from "node:http";
import { Readable } from "node:stream";
import { FunctionsHandler } from "@netlify/functions-dev";

const functions = new FunctionsHandler({
  config: { get: () => ({ functions: {} }) },
  destPath: ".netlify/functions-serve",
  projectRoot: process.cwd(),
  settings: { port: Number(process.env.PORT), functionsPort: Number(process.env.PORT) },
  userFunctionsPath: "netlify/functions",
  geolocation: { city: "", country: { code: "", name: "" }, subdivision: { code: "", name: "" } },
});

createServer(async (req, res) => {
  try {
    const body = req.method === "GET" || req.method === "HEAD" ? undefined : Readable.toWeb(req);
    const headers = Object.entries(req.headers).flatMap(([key, value]) => [value].flat().map((v) => [key, String(v)]));
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body,
      duplex: "half",
    });
    const match = await functions.match(request);
    const response = match ? await match.handle(request) : new Response(null, { status: 404 });
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  } catch (error) {
    console.error(error);
    res.writeHead(500).end();
  }
}).listen(Number(process.env.PORT), process.env.HOST);
