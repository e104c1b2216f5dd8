package slack

import "encoding/json"

// RenderDigest is the default rendering of a digest of texts, as its
// message's text and Block Kit JSON, for the tests of Slack's limits.
func RenderDigest(texts []string) (string, json.RawMessage, error) {
	m := renderDigest(texts)
	blocks, err := json.Marshal(m.blocks.BlockSet)
	return m.Text, blocks, err
}
