package sinks

import (
	"errors"
	"net/url"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/netguard"
)

// TransportError turns an error from http.Client.Do into a delivery outcome:
// a refused non-public address is [sink.Permanent] (retrying reaches the
// same address, and the configuration has to change), anything else
// (timeouts, refused or reset connections, DNS failures) is returned as a
// plain, retryable error.
//
// The request URL is stripped from the error: webhook URLs often carry a
// token in their path or query, and errors end up in logs and in the
// outbox's last_error column.
func TransportError(err error) error {
	if err == nil {
		return nil
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	if errors.Is(err, netguard.ErrNonPublicAddress) {
		return sink.Permanent(err)
	}
	return err
}
