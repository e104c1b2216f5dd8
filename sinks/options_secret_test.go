package sinks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/sinks"
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
// names the option but not the value.
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
		{map[string]any{"allow_private": secret}, "allow_private"},
		{map[string]any{"to": 31415926}, "to"},
		{map[string]any{"headers": secret}, "headers"},
		{map[string]any{"headers": map[string]any{"Authorization": 31415926}}, "headers"},
	}
	for _, c := range cases {
		var o secretOptions
		err := sinks.DecodeOptions(c.options, &o)
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
	err := sinks.DecodeOptions(map[string]any{"secrte": "x"}, &o)
	if err == nil || !strings.Contains(err.Error(), "secrte") {
		t.Errorf("unknown option: %v, want an error naming it", err)
	}
}
