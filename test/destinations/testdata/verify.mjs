// Verifies recorded webhook requests with the official `standardwebhooks`
// npm package, once per secret. Reads one JSON object per line on stdin,
// {"secrets": ["whsec_..."], "headers": {...}, "body": "..."}, and prints
// one line per object: {"verified": [true, false, ...]}, one entry per
// secret. The package is resolved from examples/node (EXAMPLES_DIR).
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const require = createRequire(path.join(process.env.EXAMPLES_DIR, "package.json"));
const { Webhook } = require("standardwebhooks");

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const req = JSON.parse(line);
  const verified = req.secrets.map((secret) => {
    try {
      new Webhook(secret).verify(req.body, req.headers);
      return true;
    } catch {
      return false;
    }
  });
  console.log(JSON.stringify({ verified }));
}
