// A stand-in for the Azure Functions host and its Node.js worker, which are not npm packages and
// do not run offline. It does what the worker does with @azure/functions, and no more: it provides
// the `@azure/functions-core` module the worker injects (through which app.http() registers the
// function and its programming model), and for each HTTP request it hands the library the
// invocation the host would send over gRPC (the method, URL, headers and body bytes as RpcHttpData),
// then calls the library's own InvocationModel: getArguments() (which builds the real HttpRequest),
// invokeFunction() and getResponse() (which turns the handler's answer into RpcHttpData), and
// writes that answer back. Usage: node --import tsx host.mjs <function file>, with PORT and HOST.
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import Module from "node:module";
import { pathToFileURL } from "node:url";

let model;
const functions = new Map();
const core = {
  version: "3.10.1",
  setProgrammingModel(programmingModel) {
    model = programmingModel;
  },
  getProgrammingModel: () => model,
  registerFunction(metadata, callback) {
    functions.set(metadata.name, { metadata, callback });
    return { dispose() {} };
  },
  registerHook: () => ({ dispose() {} }),
  log: (_level, _category, message) => console.log(message),
  Disposable: class {
    constructor(callback) {
      this.dispose = callback;
    }
  },
};
const load = Module._load;
Module._load = function (request, ...rest) {
  return request === "@azure/functions-core" ? core : load.call(this, request, ...rest);
};

await import(pathToFileURL(process.argv[2]).href);
await model.getCapabilities({});

createServer(async (req, res) => {
  try {
    // The host routes /api/<name> (its default route prefix) to the function of that name.
    const name = new URL(req.url, "http://localhost").pathname.replace(/^\/api\//, "");
    const registered = functions.get(name);
    if (!registered) {
      res.writeHead(404).end();
      return;
    }
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const headers = Object.fromEntries(Object.entries(req.headers).map(([key, value]) => [key, String(value)]));
    const trigger = Object.entries(registered.metadata.bindings).find(([, binding]) => binding.direction === "in");
    const invocation = {
      invocationId: randomUUID(),
      metadata: registered.metadata,
      request: {
        inputData: [
          {
            name: trigger[0],
            data: {
              http: {
                method: req.method,
                url: `http://${req.headers.host}${req.url}`,
                headers,
                body: { bytes: new Uint8Array(Buffer.concat(chunks)) },
                params: {},
                query: {},
              },
            },
          },
        ],
        triggerMetadata: {},
      },
    };
    const invocationModel = model.getInvocationModel(invocation);
    const { context, inputs } = await invocationModel.getArguments();
    const result = await invocationModel.invokeFunction(context, inputs, registered.callback);
    const { http } = (await invocationModel.getResponse(context, result)).returnValue;
    res.writeHead(Number(http.statusCode), http.headers);
    res.end(http.body?.bytes ?? http.body?.string ?? "");
  } catch (error) {
    console.error(error);
    res.writeHead(500).end();
  }
}).listen(Number(process.env.PORT), process.env.HOST);
