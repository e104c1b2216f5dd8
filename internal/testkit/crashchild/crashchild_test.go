package crashchild

import "testing"

func TestWithApplicationNameKeepsTheRestOfTheConnectionString(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable": "postgres://postgres@127.0.0.1:5432/test?application_name=child-1&sslmode=disable",
		"postgresql://u@h/db":         "postgresql://u@h/db?application_name=child-1",
		"host=127.0.0.1 dbname=test ": "host=127.0.0.1 dbname=test application_name=child-1",
	} {
		if got := withApplicationName(dsn, "child-1"); got != want {
			t.Errorf("withApplicationName(%q) = %q, want %q", dsn, got, want)
		}
	}
}
