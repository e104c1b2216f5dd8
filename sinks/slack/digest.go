package slack

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/outboxd/outboxd/core/sink"
)

// Slack's limits on one message (chat.postMessage), which a digest's
// default rendering stays within.
const (
	// MaxBlocks is the most blocks one message may carry.
	MaxBlocks = 50
	// MaxSectionText is the most characters of a section block's text.
	MaxSectionText = 3000
	// MaxMessageText is the most characters of a message's text.
	MaxMessageText = 40000
	// maxDigestLine bounds one member's line, so a long message cannot
	// crowd out the others.
	maxDigestLine = 500
)

var _ sink.DigestSink = (*Sink)(nil)

// DeliverDigest posts a digest as one message: the digest template's
// payload when the route target has one, else the default rendering (a
// header line, one line per member with its text, and "and N more" past
// Slack's limits), within Slack's block and text limits. A member whose
// payload cannot be posted is refused (sink.RefuseMembers) so the others
// go out without it. A retry looks for an earlier post of the digest
// first, as Deliver does for a row, by the digest's delivery id.
func (s *Sink) DeliverDigest(ctx context.Context, dg *sink.Digest) error {
	texts := make([]string, len(dg.Members))
	refused := map[int]error{}
	channel := ""
	for i, d := range dg.Members {
		m, err := parsePayload(d.Payload, s.opts.EscapeMentions)
		if err == nil && m.Channel != "" && !s.opts.allowsChannel(m.Channel) {
			err = sink.Permanent(fmt.Errorf("payload channel %q is not the channel option nor in allowed_channels", m.Channel))
		}
		if err != nil {
			refused[i] = s.fail(d, err)
			continue
		}
		texts[i], channel = memberText(m), cmp.Or(channel, s.channelOf(m, nil))
	}
	if len(refused) > 0 {
		return sink.RefuseMembers(refused)
	}
	m, err := s.digestMessage(dg, texts)
	if err != nil {
		return s.failDigest(dg, err)
	}
	if s.api == nil {
		return s.failDigest(dg, s.postWebhook(ctx, m))
	}
	// The members' channel (they share their rate key), unless the
	// digest template names one.
	channel = cmp.Or(m.Channel, channel)
	if err := s.checkChannel(channel); err != nil {
		return s.failDigest(dg, err)
	}
	d := digestDelivery(dg)
	posted, err := s.post(ctx, d, m, channel)
	if err != nil {
		return s.failDigest(dg, err)
	}
	if err := s.receipt(d, posted); err != nil {
		return err
	}
	return dg.SetReceipt(d.Receipt())
}

// digestDelivery stands for the digest in the duplicate check: its
// metadata names the digest's delivery id instead of a row's dedup key, and
// it is retried when any member is.
func digestDelivery(dg *sink.Digest) *sink.Delivery {
	d := &sink.Delivery{ID: dg.ID, Sink: dg.Sink, DedupKey: digestDedupKey(dg), Uncertain: dg.Uncertain, Attempt: 1}
	for _, m := range dg.Members {
		d.Attempt = max(d.Attempt, m.Attempt)
		if d.CreatedAt.IsZero() || m.CreatedAt.Before(d.CreatedAt) {
			d.CreatedAt = m.CreatedAt
		}
	}
	return d
}

// digestDedupKey is the dedup key a digest's post carries in its
// metadata: its delivery id after the sink's name.
func digestDedupKey(dg *sink.Digest) string {
	return strings.TrimPrefix(dg.DeliveryID(), url.PathEscape(dg.Sink)+"/")
}

// digestMessage is the message a digest posts: its template's payload, or
// the default rendering of the members' texts.
func (s *Sink) digestMessage(dg *sink.Digest, texts []string) (message, error) {
	if dg.Payload != nil {
		return parsePayload(dg.Payload, s.opts.EscapeMentions)
	}
	return renderDigest(texts), nil
}

// memberText is the line a member shows in the default rendering: its
// text, else the text of its blocks' sections.
func memberText(m message) string {
	if m.Text != "" {
		return m.Text
	}
	var parts []string
	for _, b := range m.blocks.BlockSet {
		if sec, ok := b.(*slackapi.SectionBlock); ok && sec.Text != nil {
			parts = append(parts, sec.Text.Text)
		}
	}
	return strings.Join(parts, " ")
}

// renderDigest is the default rendering of a digest of texts: a header
// section, then the members' lines packed into sections of at most
// MaxSectionText characters, at most MaxBlocks blocks in all, and, when the
// lines do not fit, a last line saying how many more there were. The
// message's text (the notification) is the header line.
func renderDigest(texts []string) message {
	header := strconv.Itoa(len(texts)) + " new messages"
	if len(texts) == 1 {
		header = "1 new message"
	}
	blocks := []slackapi.Block{section("*" + header + "*")}
	var b strings.Builder
	total := len(header)
	shown := 0
	// One block is kept for the "and N more" line.
	for _, t := range texts {
		line := "• " + oneLine(t)
		full := b.Len() > 0 && b.Len()+1+len(line) > MaxSectionText
		if full && len(blocks) >= MaxBlocks-2 {
			break
		}
		if total+len(line)+1 > MaxMessageText-100 {
			break
		}
		if full {
			blocks = append(blocks, section(b.String()))
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
		total += len(line) + 1
		shown++
	}
	if b.Len() > 0 {
		blocks = append(blocks, section(b.String()))
	}
	if more := len(texts) - shown; more > 0 {
		blocks = append(blocks, section(fmt.Sprintf("_and %d more_", more)))
	}
	return message{Payload: Payload{Text: header}, blocks: slackapi.Blocks{BlockSet: blocks}}
}

// section is a mrkdwn section block.
func section(text string) *slackapi.SectionBlock {
	return slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType, text, false, false), nil, nil)
}

// oneLine is t on one line, cut to maxDigestLine characters (not bytes:
// a cut never splits a character).
func oneLine(t string) string {
	t = strings.Join(strings.Fields(t), " ")
	if utf8.RuneCountInString(t) <= maxDigestLine {
		return t
	}
	r := []rune(t)
	return string(r[:maxDigestLine-1]) + "…"
}

// failDigest prefixes a digest's error with the sink's name, keeping its
// class.
func (s *Sink) failDigest(dg *sink.Digest, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("slack sink %q, digest %d: %w", s.name, dg.ID, err)
}
