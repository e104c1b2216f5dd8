package registry_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/registry"
)

type secretOptions struct {
	Secret  string            `mapstructure:"secret"`
	Port    int               `mapstructure:"port"`
	Timeout time.Duration     `mapstructure:"timeout"`
	Private bool              `mapstructure:"allow_private"`
	List    []string          `mapstructure:"to"`
	Headers map[string]string `mapstructure:"headers"`
}

// TestDecodeOptionsErrorsNeverQuoteValues feeds every kind of wrongly typed
// value, each carrying a distinctive secret, and requires an error that
// names the option but not the value. (Mutation: DecodeOptions returning
// the decoder's own error fails this test.)
func TestDecodeOptionsErrorsNeverQuoteValues(t *testing.T) {
	t.Parallel()
	const secret = "S3CRETVALUE"
	cases := []struct {
		options map[string]any
		option  string
	}{
		{map[string]any{"secret": 31415926}, "secret"},
		{map[string]any{"secret": []any{secret}}, "secret"},
		{map[string]any{"secret": map[string]any{"k": secret}}, "secret"},
		{map[string]any{"port": secret}, "port"},
		{map[string]any{"timeout": secret}, "timeout"},
		{map[string]any{"timeout": 31415926}, "timeout"}, // a bare number would be nanoseconds
		{map[string]any{"allow_private": secret}, "allow_private"},
		{map[string]any{"to": 31415926}, "to"},
		{map[string]any{"headers": secret}, "headers"},
		{map[string]any{"headers": map[string]any{"Authorization": 31415926}}, "headers"},
	}
	for _, c := range cases {
		var o secretOptions
		err := registry.DecodeOptions(c.options, &o)
		if err == nil {
			t.Errorf("%v: decoded without error", c.options)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, secret) || strings.Contains(msg, "31415926") {
			t.Errorf("%v: error quotes the value: %s", c.options, msg)
		}
		if !strings.Contains(msg, "option "+c.option) {
			t.Errorf("%v: error does not name option %s: %s", c.options, c.option, msg)
		}
	}
	var o secretOptions
	err := registry.DecodeOptions(map[string]any{"secrte": "x"}, &o)
	if err == nil || !strings.Contains(err.Error(), "secrte") {
		t.Errorf("unknown option: %v, want an error naming it", err)
	}
}

// TestDecodeOptionsReportsEveryProblem: unknown options with suggestions,
// a bare number for a duration and a wrong type, all in one error that
// cmd can take apart by option.
func TestDecodeOptionsReportsEveryProblem(t *testing.T) {
	t.Parallel()
	o := secretOptions{Timeout: time.Second}
	err := registry.DecodeOptions(map[string]any{"timout": "5s", "port": "many", "allow_private": true, "to": "a,b"}, &o)
	var oe *registry.OptionsError
	if !errors.As(err, &oe) || len(oe.Problems) != 2 {
		t.Fatalf("error %v, want an *OptionsError with two problems", err)
	}
	for _, want := range []string{"unknown option timout (did you mean timeout?)", "option port: want a whole number, got a string"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if o.Timeout != time.Second || !o.Private || len(o.List) != 2 {
		t.Errorf("defaults or good options lost: %+v", o)
	}
	if err := registry.DecodeOptions(map[string]any{"timeout": 5}, &o); err == nil || !strings.Contains(err.Error(), "option timeout: want a duration with a unit") {
		t.Errorf("timeout: 5 gave %v", err)
	}
}
