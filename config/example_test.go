package config_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/outboxd/outboxd/config"
)

// A typo in plugins.yaml is reported with the file, line and column, its
// key path and the nearest valid key.
func ExampleParse() {
	doc := []byte("relay:\n  bach_size: 100\n")
	_, err := config.Parse(doc, "plugins.yaml", func(string) (string, bool) { return "", false })
	fmt.Println(err)
	// Output: configuration plugins.yaml:2:3: unknown key relay.bach_size (did you mean relay.batch_size?)
}

// An operator command loads a plugins.yaml as config.DatabaseOnly: the
// sinks' options are left out, so the secrets they reference need not be
// set, while their names, types and policies are there.
func ExampleLoad() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "plugins.yaml")
	doc := "sinks:\n  ops-slack:\n    type: slack\n    max_attempts: 3\n    options: {token: \"${SLACK_BOT_TOKEN}\", channel: \"#ops\"}\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		fmt.Println(err)
		return
	}
	noEnv := config.EnvMap(nil)
	loaded, err := config.Load(config.Source{Path: path, PathGiven: true, Env: noEnv}, config.DatabaseOnly)
	fmt.Println(err, loaded.Config.Sinks["ops-slack"].Type, loaded.Config.Sinks["ops-slack"].MaxAttempts)
	_, err = config.Load(config.Source{Path: path, PathGiven: true, Env: noEnv}, config.Everything)
	fmt.Println(err != nil)
	// Output:
	// <nil> slack 3
	// true
}
