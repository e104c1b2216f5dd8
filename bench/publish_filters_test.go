package main

import (
	"testing"
)

// TestQuickPublishFilters runs the publish-filters scenario quick: its
// table is there, and every publish made the rows its tenant's filters
// let through (the scenario checks the count and fails otherwise).
// (Mutation tried: fan_out_destinations() in migration 030 without its
// filter test makes every event fan out to its tenant's 10 destinations;
// the scenario fails, "100 events made 1000 destination rows, want 532",
// and this test.)
func TestQuickPublishFilters(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	quickRun(t, []string{"-only", "publish-filters", "-systems", "outboxd"},
		"### publish-filters: 30 tenants x 10 destinations, with and without payload filters",
		"| without filters |", "| each with a 3-clause filter |")
}
