package config_test

import (
	"fmt"

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
