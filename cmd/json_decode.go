package cmd

import (
	"encoding/json"
	"errors"
	"io"
)

// errTrailingData says a JSON object was followed by more than whitespace.
var errTrailingData = errors.New("trailing data after the JSON object")

// decodeOne decodes exactly one JSON value from r into v: unknown fields
// are errors, and so is anything but whitespace after the value ({...} xyz,
// {...} }, {...}{...}), which a plain Decode would leave unread and the
// caller would silently ignore. The HTTP API's bodies and enqueue --file's
// lines are read with it.
func decodeOne(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	_, err := dec.Token()
	var syntax *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil || errors.As(err, &syntax):
		return errTrailingData
	}
	return err // reading failed: a body over its limit, a broken connection
}
