// Enqueue an outboxd message from Node.js inside the application's own
// transaction, with the `pg` package and the SQL function that
// `outboxd migrate` installs: <schema>.enqueue(sink, dedup_key, payload, ...).
//
//   DATABASE_URL=postgres://... node enqueue.mjs SINK DEDUP_KEY '{"order": 42}'
//
// OUTBOXD_DATABASE_SCHEMA names the outbox's schema (default "outbox",
// the variable that sets database.schema for outboxd too); ROLLBACK=1
// rolls the transaction back instead of committing, as a failed business
// write would: the message then never exists and is never delivered.
// TRACEPARENT, when set, is passed in the message's headers so the delivery
// continues the caller's trace.
import pg from "pg";

const [sink, dedupKey, payload] = process.argv.slice(2);
if (!sink || !dedupKey || !payload) {
  console.error("usage: node enqueue.mjs SINK DEDUP_KEY JSON_PAYLOAD");
  process.exit(2);
}
const schema = process.env.OUTBOXD_DATABASE_SCHEMA || "outbox";
const headers = process.env.TRACEPARENT ? { traceparent: process.env.TRACEPARENT } : {};

const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
await client.connect();
try {
  await client.query("BEGIN");
  // ... the application's own writes go here, in the same transaction ...
  const { rows } = await client.query(
    `SELECT id, created FROM ${client.escapeIdentifier(schema)}.enqueue($1, $2, $3, headers => $4)`,
    [sink, dedupKey, payload, headers],
  );
  if (process.env.ROLLBACK === "1") {
    await client.query("ROLLBACK");
    console.log(`rolled back ${rows[0].id}`);
  } else {
    await client.query("COMMIT"); // the relays are woken now, not before
    console.log(`${rows[0].created ? "created" : "duplicate"} ${rows[0].id}`);
  }
} catch (err) {
  await client.query("ROLLBACK").catch(() => {});
  // Invalid input raises SQLSTATE 22023 with a message naming the field.
  console.error(`enqueue failed (${err.code}): ${err.message}`);
  process.exitCode = err.code === "22023" ? 2 : 1;
} finally {
  await client.end();
}
