// Loads the core as a runtime without Node built-ins would (Cloudflare Workers without
// compatibility flags): no global Buffer and no process.getBuiltinModule before the import.
const [secret, body, signature] = JSON.parse(process.argv[2]);
const bytes = Uint8Array.from(body.match(/../g) ?? [], (h) => Number.parseInt(h, 16));
globalThis.Buffer = undefined;
process.getBuiltinModule = undefined;

const core = await import("flag-webhooks");
const subtleCalls = { count: 0 };
const verify = crypto.subtle.verify.bind(crypto.subtle);
crypto.subtle.verify = (...args) => {
  subtleCalls.count++;
  return verify(...args);
};
const results = {
  signed: (await core.sign({ secret, payload: bytes })) === signature,
  verified: await core.verifySignature({ secret, payload: bytes, signature }),
  rejected: !(await core.verifySignature({ secret, payload: bytes, signature: signature.toUpperCase() })),
  type: (await core.verifyEvent({ secret, payload: bytes, signature })).type,
  webCryptoCalls: subtleCalls.count,
};
console.log(JSON.stringify(results));
