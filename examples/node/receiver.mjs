// A webhook endpoint that verifies outboxd's Standard Webhooks signature
// with the official `standardwebhooks` package before trusting a delivery.
//
//   WEBHOOK_SECRET=whsec_... node receiver.mjs [PORT]
//
// It listens on 127.0.0.1 (PORT, default 0: any free port), prints
// "listening <url>" once ready, then one JSON line per request:
// {"verified": true, "id": <webhook-id>, "payload": ...} for a good
// signature (answered 204), {"verified": false, "error": ...} otherwise
// (answered 401, which outboxd treats as permanent: fix the secret and
// redrive the dead letters).
import http from "node:http";
import { Webhook } from "standardwebhooks";

// Bodies above this are refused rather than read into memory.
const maxBodyBytes = 1 << 20;

const webhook = new Webhook(process.env.WEBHOOK_SECRET);
const port = Number(process.argv[2] || 0);

const server = http.createServer((req, res) => {
  const chunks = [];
  let size = 0;
  req.on("data", (chunk) => {
    size += chunk.length;
    if (size > maxBodyBytes) {
      res.writeHead(413).end();
      req.destroy();
      return;
    }
    chunks.push(chunk);
  });
  req.on("end", () => {
    // Verify the exact bytes received: parsing and re-serialising the
    // JSON first would change them and break the signature.
    const body = Buffer.concat(chunks);
    try {
      const payload = webhook.verify(body, req.headers);
      // webhook-id is the message's dedup key, the same on every retry:
      // a receiver that stores it can drop redeliveries.
      console.log(JSON.stringify({ verified: true, id: req.headers["webhook-id"], payload }));
      res.writeHead(204).end();
    } catch (err) {
      console.log(JSON.stringify({ verified: false, error: err.message }));
      res.writeHead(401).end();
    }
  });
});

server.listen(port, "127.0.0.1", () => {
  console.log(`listening http://127.0.0.1:${server.address().port}/hook`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
