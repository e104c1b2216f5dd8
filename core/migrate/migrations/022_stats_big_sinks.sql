-- When the stats snapshot last counted a sink's open rows
-- (take_stats_snapshot.sql). A sink with a large backlog (a paused sink, a
-- throttled one, one no relay is configured for) is counted again only
-- every few minutes: counting a million open rows reads each of them, a
-- core busy for seconds, and every few seconds that was a tenth of the
-- database's time taken from the claims of every other sink.
ALTER TABLE sink_stats ADD COLUMN open_counted_at timestamptz;
