// Publish an outboxd event from Node.js inside the application's own
// transaction, with the `pg` package and the SQL function that
// `outboxd migrate` installs: <schema>.publish(type, key, data, ...). The
// routes applied to the database (plugins.yaml's, by outboxd migrate or
// outboxd routes apply) decide which sinks get a row and how it looks.
//
//   DATABASE_URL=postgres://... node publish.mjs TYPE KEY '{"id": 42}' [THREAD_KEY]
//
// OUTBOXD_DATABASE_SCHEMA names the outbox's schema (default "outbox",
// the variable that sets database.schema for outboxd too); ROLLBACK=1
// rolls the transaction back instead of committing, as a failed business
// write would: the event then makes no row and nothing is delivered.
// Prints one line per target: "created SINK ID" or "duplicate SINK ID".
import pg from "pg";

const [type, key, data, threadKey] = process.argv.slice(2);
if (!type || !key || !data) {
  console.error("usage: node publish.mjs TYPE KEY JSON_DATA [THREAD_KEY]");
  process.exit(2);
}
const schema = process.env.OUTBOXD_DATABASE_SCHEMA || "outbox";

const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
await client.connect();
try {
  await client.query("BEGIN");
  // ... the application's own writes go here, in the same transaction ...
  const { rows } = await client.query(
    `SELECT sink, id, created FROM ${client.escapeIdentifier(schema)}.publish($1, $2, $3, thread_key => $4)`,
    [type, key, data, threadKey ?? null],
  );
  if (process.env.ROLLBACK === "1") {
    await client.query("ROLLBACK");
    console.log(`rolled back ${rows.length} rows`);
  } else {
    await client.query("COMMIT"); // the relays are woken now, not before
    for (const r of rows) {
      console.log(`${r.created ? "created" : "duplicate"} ${r.sink} ${r.id}`);
    }
  }
} catch (err) {
  await client.query("ROLLBACK").catch(() => {});
  // A bad event raises SQLSTATE 22023, an event no route matches P0002.
  console.error(`publish failed (${err.code}): ${err.message}`);
  process.exitCode = err.code === "22023" || err.code === "P0002" ? 2 : 1;
} finally {
  await client.end();
}
