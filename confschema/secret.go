package confschema

import (
	"log/slog"
	"reflect"
)

// Secret is the type of a key whose value is a credential (a token, a
// password, a signing key, a header value): declaring a key as Secret is
// what makes it one, whatever its name. Values renders it as
// SecretRedacted, so `outboxd config show` never prints it; Secrets
// collects it, so that the binary's one scrubber (internal/secret) removes
// it from logs, errors, stored errors and spans; and it formats and logs
// as SecretRedacted, so printing one by mistake leaks nothing. The value
// itself is string(s).
//
//	type Options struct {
//		SigningKey confschema.Secret `mapstructure:"signing_key" doc:"HMAC key"`
//	}
type Secret string

// SecretRedacted replaces a secret wherever the program would otherwise
// show it.
const SecretRedacted = "[REDACTED]"

// String returns SecretRedacted (empty for an empty secret), so that %v,
// %s and %q never print the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return SecretRedacted
}

// GoString is String, for %#v.
func (s Secret) GoString() string { return s.String() }

// LogValue is String, for slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

var secretType = reflect.TypeFor[Secret]()

// Secrets returns the values of every key of v (a declaring struct or a
// pointer to one) declared as Secret: a Secret, a list of them, a mapping
// of them (headers), at any depth. Empty values are left out.
func Secrets(v any) []string {
	var out []string
	collectSecrets(reflect.ValueOf(v), &out)
	return out
}

func collectSecrets(v reflect.Value, out *[]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collectSecrets(v.Elem(), out)
		}
	case reflect.Struct:
		for _, f := range fieldsOf(v.Type()) {
			collectSecrets(v.FieldByIndex(f.index), out)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			collectSecrets(v.Index(i), out)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			collectSecrets(iter.Value(), out)
		}
	case reflect.String:
		if v.Type() == secretType && v.String() != "" {
			*out = append(*out, v.String())
		}
	}
}
