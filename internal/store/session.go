package store

// RelaySession returns the settings of the connections the relay claims,
// finishes and keeps its statistics through, which the plans of those
// statements are written for (the relay sets them as its pool's run-time
// parameters; the plan tests set them before they EXPLAIN):
//
//   - jit off: a generic plan over a large backlog is estimated above
//     jit_above_cost, and compiling it would cost more than the whole
//     statement (half a second for the stats snapshot beside 3M rows).
//   - enable_seqscan off: the relay prepares each statement once per
//     connection, and PostgreSQL keeps the generic plan it makes after
//     five runs until the table's statistics change. A plan made while
//     the table was new and empty, where reading it whole and sorting
//     costs nothing, read a million rows per claim once the table had
//     grown (300 ms a claim until autovacuum's first ANALYZE). No
//     statement of the relay should read a growing table whole; a table
//     without a usable index is still read whole (the setting only
//     prices that plan out where another exists).
//   - enable_bitmapscan off: the claim must read a sink's rows in the
//     open index's order and stop at its limit. Where the statistics say
//     the sink has a row or two (a small table analyzed, a table since
//     truncated or emptied: the normal state of a healthy outbox, then a
//     burst), the planner gathered all of them with a bitmap scan to sort
//     them instead: under overload, beside a million waiting rows, each
//     claim took 2-3 s and delivery collapsed to a tenth of capacity
//     (bench pressure-overload; test/plans
//     TestClaimReadsOnlyWhatItTakesWhateverTheStatistics). The relay's
//     other statements find their rows by key.
func RelaySession() map[string]string {
	return map[string]string{"jit": "off", "enable_seqscan": "off", "enable_bitmapscan": "off"}
}
