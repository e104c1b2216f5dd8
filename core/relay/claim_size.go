package relay

import "github.com/outboxd/outboxd/internal/store"

// claimSize sizes a claim loop's claims in bytes as well as rows: a claim
// takes BatchSize rows, or fewer when the payloads the loop's last claim
// returned say that BatchSize of them would hold more than MaxClaimBytes.
// Rows are claimed by one statement whose size is chosen before their
// payloads are seen, so the estimate is the last claim's average payload,
// starting from store.DefaultMaxPayloadBytes (the largest a producer with
// default options may enqueue): a relay's first claim is bounded whatever
// the backlog holds, and small payloads reach full batches from the
// second claim on, with no statement added to any claim. A claim right
// after the payloads grew is the only one that can exceed MaxClaimBytes.
type claimSize struct {
	maxBytes int // Config.MaxClaimBytes
	perRow   int // the estimated payload bytes of one row, at least 1
}

func newClaimSize(maxBytes int) *claimSize {
	return &claimSize{maxBytes: maxBytes, perRow: store.DefaultMaxPayloadBytes}
}

// rows is how many rows the next claim may take: batch, or fewer (at least
// one) whose estimated payloads fit the claim's bytes.
func (s *claimSize) rows(batch int) int {
	return max(1, min(batch, s.maxBytes/s.perRow))
}

// observe takes the average payload of a claim's rows as the estimate;
// an empty claim tells nothing and leaves it.
func (s *claimSize) observe(rows []*claimedRow) {
	if len(rows) == 0 {
		return
	}
	total := 0
	for i := range rows {
		total += len(rows[i].Payload)
	}
	s.perRow = max(1, total/len(rows))
}
