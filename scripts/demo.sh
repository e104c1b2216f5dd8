#!/usr/bin/env bash
# make demo: outboxd end to end on this machine in under a minute.
#
# Uses $DATABASE_URL, else the local PostgreSQL at 127.0.0.1:5432, else a
# private throwaway cluster started from the installed PostgreSQL binaries
# (so it works with PostgreSQL down). Then it migrates, runs `outboxd serve`
# with examples/demo/plugins.yaml (a log sink and a webhook to a local
# receiver), enqueues sample messages, shows them delivered with
# `outboxd stats`, and stops everything it started. DEMO_PRIVATE_CLUSTER=1
# forces the private cluster. DEMO_KEEP=1 keeps everything running after
# the tour, with the console's URL printed, until Ctrl-C (or SIGTERM).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="$(mktemp -d "${TMPDIR:-/tmp}/outboxd-demo.XXXXXX")"
chmod 755 "$work" # the postgres user must reach the private cluster's files
pids=()
pg_data=""

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

as_pg() {
	# initdb and pg_ctl refuse to run as root: use the postgres user then.
	if [[ "$(id -u)" == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cleanup() {
	# Stop serve (SIGTERM: it drains) and the receiver before the database.
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [[ -n "$pg_data" ]]; then as_pg "$pg_bin/pg_ctl" -D "$pg_data" -m fast -w stop >/dev/null 2>&1 || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

say "Building outboxd"
go build -o "$work/outboxd" ./cmd/outboxd
go build -o "$work/receiver" ./examples/demo/receiver
outboxd() { "$work/outboxd" --config examples/demo/plugins.yaml "$@"; }

# can_connect migrates the demo's schema at $1 (what the demo does first
# anyway); outboxd's error, if any, is left in probe.log.
can_connect() { DATABASE_URL="$1" outboxd migrate >/dev/null 2>"$work/probe.log"; }

# free_port prints a port nothing listens on, for the private cluster
# (PostgreSQL cannot be told to pick one). The range lies below Linux's
# ephemeral ports (32768-60999), so no outgoing connection takes it between
# this check and the cluster's start.
free_port() {
	local port
	for port in $(seq 25432 25532); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
	done
	echo "demo: no free port between 25432 and 25532" >&2
	exit 1
}

start_private_cluster() {
	pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
	if [[ -z "$pg_bin" ]] && command -v pg_config >/dev/null; then pg_bin="$(pg_config --bindir)"; fi
	if [[ -z "$pg_bin" || ! -x "$pg_bin/initdb" ]]; then
		echo "demo: no PostgreSQL reachable or installed; install it with: sudo apt-get install postgresql (or set DATABASE_URL)" >&2
		exit 1
	fi
	local port
	port="$(free_port)"
	pg_data="$work/pgdata"
	mkdir -p "$pg_data" "$work/sock"
	if [[ "$(id -u)" == 0 ]]; then chown postgres "$pg_data" "$work/sock"; fi
	say "No PostgreSQL reachable: starting a private throwaway cluster on 127.0.0.1:$port"
	echo "demo: using a private cluster on 127.0.0.1:$port"
	as_pg "$pg_bin/initdb" -D "$pg_data" -U postgres --auth=trust -E UTF8 >"$work/initdb.log" 2>&1 ||
		{ cat "$work/initdb.log" >&2; exit 1; }
	as_pg "$pg_bin/pg_ctl" -D "$pg_data" -l "$work/sock/postgres.log" -w \
		-o "-p $port -k $work/sock -c listen_addresses=127.0.0.1" start >/dev/null
	DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

# The receiver and the variables plugins.yaml expands come first: the
# database probe below runs outboxd with that configuration.
say "Starting a local webhook receiver"
"$work/receiver" -url-file "$work/receiver.url" &
pids+=($!)
for _ in $(seq 1 50); do [[ -s "$work/receiver.url" ]] && break; sleep 0.1; done
export DEMO_WEBHOOK_URL="$(cat "$work/receiver.url")"
export DEMO_WEBHOOK_SECRET="whsec_$(head -c 32 /dev/urandom | base64 | tr -d '\n')"
echo "receiver at $DEMO_WEBHOOK_URL"

say "Finding a database"
local_url="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
if [[ -n "${DEMO_PRIVATE_CLUSTER:-}" ]]; then
	start_private_cluster # forced, to try the path taken when PostgreSQL is down
elif [[ -n "${DATABASE_URL:-}" ]] && can_connect "$DATABASE_URL"; then
	echo "demo: using \$DATABASE_URL"
else
	if [[ -n "${DATABASE_URL:-}" ]]; then
		echo "demo: \$DATABASE_URL does not work: $(tail -n 1 "$work/probe.log")"
	fi
	if can_connect "$local_url"; then
		DATABASE_URL="$local_url"
		echo "demo: using the local PostgreSQL at 127.0.0.1:5432"
	else
		start_private_cluster
	fi
fi
export DATABASE_URL
# Port 0: the kernel picks a free port as serve binds, so no other program
# can take it first; serve's "http api listening" log line says which.
export DEMO_LISTEN="127.0.0.1:0"

say "outboxd migrate"
outboxd migrate

say "outboxd serve (relay + HTTP API)"
: >"$work/serve.log" # exists before tee opens it, for the loop below
"$work/outboxd" --config examples/demo/plugins.yaml serve --log-format text > >(tee "$work/serve.log") 2>&1 &
serve_pid=$!
pids+=("$serve_pid") # the process itself, not tee, so cleanup's SIGTERM reaches it
api=""
for _ in $(seq 1 150); do
	api="$(sed -n 's/.*msg="http api listening".* addr=\([0-9.:]*\).*/\1/p' "$work/serve.log")"
	[[ -n "$api" ]] && curl -fsS "http://$api/readyz" >/dev/null 2>&1 && break
	if ! kill -0 "$serve_pid" 2>/dev/null; then
		echo "demo: outboxd serve exited before it was ready; its output is above" >&2
		exit 1
	fi
	sleep 0.2
done
if [[ -z "$api" ]]; then
	echo "demo: outboxd serve did not start listening within 30 s; its output is above" >&2
	exit 1
fi
echo "demo: HTTP API at http://$api"
echo "demo: console at http://$api/"

say "outboxd enqueue: sample messages"
run="$(date +%s)"
outboxd enqueue --sink audit-log --key "signup-$run" --text "a user signed up"
outboxd enqueue --sink partner --key "order-$run-1" --payload '{"order": 1, "total": "12.50"}'
outboxd enqueue --sink partner --key "order-$run-1" --payload '{"order": 1, "total": "12.50"}' # a retry: duplicate
for i in 2 3 4 5; do
	echo "{\"sink\":\"partner\",\"dedup_key\":\"order-$run-$i\",\"payload\":{\"order\":$i}}"
done | outboxd enqueue --file -
curl -fsS -X POST "http://$api/v1/messages" -H 'Content-Type: application/json' \
	-d "{\"sink\":\"audit-log\",\"dedup_key\":\"http-$run\",\"payload\":{\"via\":\"HTTP API\"}}"
echo

say "SQL: outbox_demo.enqueue() from psql, in a transaction (any language can do this)"
if command -v psql >/dev/null; then
	psql -X -q -v ON_ERROR_STOP=1 -d "$DATABASE_URL" <<-SQL
		BEGIN;
		SELECT id, created FROM outbox_demo.enqueue('audit-log', 'sql-$run', '{"via": "SQL"}');
		COMMIT;
	SQL
else
	echo "demo: psql is not installed; skipping"
fi

say "Waiting for delivery"
for _ in $(seq 1 100); do
	if ! outboxd stats --json | grep -Eq '"(pending|in_progress|failed)": [1-9]'; then break; fi
	sleep 0.2
done

say "outboxd stats"
outboxd stats

if [[ -n "${DEMO_KEEP:-}" ]]; then
	say "Keeping the demo running (DEMO_KEEP=1): Ctrl-C stops it"
	echo "demo: console at http://$api/"
	echo "demo: try: $work/outboxd --config examples/demo/plugins.yaml audit list"
	# wait returns when serve exits or a signal arrives; cleanup then stops the rest.
	trap 'exit 0' INT TERM
	wait "$serve_pid" || true
fi
