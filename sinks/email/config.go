package email

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxd/outboxd/confschema"
)

// TLS modes accepted by the tls option.
const (
	// TLSStartTLS connects in plain text and upgrades with STARTTLS, failing
	// when the server does not offer it (submission, port 587).
	TLSStartTLS = "starttls"
	// TLSImplicit speaks TLS from the first byte (SMTPS, port 465).
	TLSImplicit = "tls"
	// TLSNone never encrypts; for local relays and test servers only.
	TLSNone = "none"
	// DefaultTLS is the tls mode when the option is not set.
	DefaultTLS = TLSStartTLS
)

// Options are the options block of an email sink, each declared here once
// (see package confschema).
type Options struct {
	// SMTP is the server as host:port.
	SMTP string `mapstructure:"smtp" defaultdoc:"required" doc:"the SMTP server as host:port"`
	// Username enables SMTP AUTH when set.
	Username string `mapstructure:"username" doc:"SMTP AUTH user; no authentication when empty"`
	// Password goes with Username. It never appears in errors or logs.
	Password confschema.Secret `mapstructure:"password" doc:"SMTP AUTH password, never logged nor shown"`
	// TLS is one of TLSStartTLS (default), TLSImplicit, TLSNone.
	TLS string `mapstructure:"tls" doc:"starttls (upgrade, port 587), tls (implicit, port 465) or none (local relays only)"`
	// From is the sender address, optionally with a display name.
	From string `mapstructure:"from" defaultdoc:"required" doc:"sender address, optionally with a display name"`
	// To are the recipients used when a payload names none.
	To []string `mapstructure:"to" doc:"recipients of a payload that names none (a list, or one string of comma-separated addresses)"`
	// AllowedRecipientDomains, when set, are the only domains mail may go
	// to: every address of the to option and of a payload's to and cc must
	// be at one of them (case-insensitive and exact: sub.example.com is
	// not example.com). A payload naming another fails permanently. Unset,
	// a payload may send to anyone: a producer chooses the recipients.
	AllowedRecipientDomains []string `mapstructure:"allowed_recipient_domains" defaultdoc:"any domain" doc:"the only domains mail may go to (to and a payload's to and cc); another fails permanently"`
	// SubjectPrefix is prepended to every subject, followed by a space.
	SubjectPrefix string `mapstructure:"subject_prefix" doc:"prepended to every subject, followed by a space"`
}

// DefaultOptions returns the options an email sink has before its options
// block applies.
func DefaultOptions() Options { return Options{TLS: DefaultTLS} }

// String describes the options without the password, so that they can be
// logged or printed safely.
func (c Options) String() string {
	return fmt.Sprintf("email{smtp=%s tls=%s from=%s to=%v user=%q password=%s}",
		c.SMTP, c.TLS, c.From, c.To, c.Username, redacted(string(c.Password)))
}

func redacted(secret string) string {
	if secret == "" {
		return "(none)"
	}
	return "(set)"
}

// server is Options checked and split into what the SMTP client needs.
type server struct {
	host string
	port int
	// domain is the right-hand side of From, used in Message-IDs.
	domain string
}

// check validates c, fills defaults in place and returns the parsed server.
// Errors name the option at fault and never include the password.
func (c *Options) check() (server, error) {
	var s server
	if c.SMTP == "" {
		return s, errors.New("option smtp is required (host:port)")
	}
	host, portText, err := net.SplitHostPort(c.SMTP)
	if err != nil || host == "" {
		return s, fmt.Errorf("option smtp: %q is not host:port", c.SMTP)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return s, fmt.Errorf("option smtp: port %q is not a number from 1 to 65535", portText)
	}
	s.host, s.port = host, port

	if c.TLS == "" {
		c.TLS = DefaultTLS
	}
	switch c.TLS {
	case TLSStartTLS, TLSImplicit, TLSNone:
	default:
		return s, fmt.Errorf("option tls: %q is not one of %s, %s, %s", c.TLS, TLSStartTLS, TLSImplicit, TLSNone)
	}
	if c.Password != "" && c.Username == "" {
		return s, errors.New("option password is set but username is empty")
	}

	if c.From == "" {
		return s, errors.New("option from is required")
	}
	from, err := mail.ParseAddress(c.From)
	if err != nil {
		return s, fmt.Errorf("option from: %q is not a mail address: %w", c.From, err)
	}
	s.domain = from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	for i, to := range c.To {
		if _, err := mail.ParseAddress(to); err != nil {
			return s, fmt.Errorf("option to[%d]: %q is not a mail address: %w", i, to, err)
		}
	}
	for i, domain := range c.AllowedRecipientDomains {
		if domain == "" || strings.ContainsAny(domain, "@ ") {
			return s, fmt.Errorf("option allowed_recipient_domains[%d]: %q is not a domain", i, domain)
		}
	}
	if err := c.checkDomains("option to", c.To); err != nil {
		return s, err
	}
	return s, nil
}

// checkDomains refuses an address of addrs (already parsed once) whose
// domain is not among AllowedRecipientDomains, when those are set. field
// names the list in the error.
func (c *Options) checkDomains(field string, addrs []string) error {
	if len(c.AllowedRecipientDomains) == 0 {
		return nil
	}
	for i, a := range addrs {
		parsed, err := mail.ParseAddress(a)
		if err != nil {
			return fmt.Errorf("%s[%d]: %q is not a mail address: %w", field, i, a, err)
		}
		domain := parsed.Address[strings.LastIndexByte(parsed.Address, '@')+1:]
		if !slices.ContainsFunc(c.AllowedRecipientDomains, func(allowed string) bool { return strings.EqualFold(allowed, domain) }) {
			return fmt.Errorf("%s[%d]: %s is not at an allowed recipient domain (%s)", field, i, parsed.Address, strings.Join(c.AllowedRecipientDomains, ", "))
		}
	}
	return nil
}
