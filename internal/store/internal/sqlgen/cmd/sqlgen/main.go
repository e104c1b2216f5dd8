// Command sqlgen writes the Go bindings of a directory of SQL statement
// files; it is run by go:generate in the package that owns them:
//
//	//go:generate go run ./internal/sqlgen/cmd/sqlgen -dir sql -out queries.gen.go
//
// See package sqlgen for the header every statement file starts with.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/outboxd/outboxd/internal/store/internal/sqlgen"
)

func main() {
	dir := flag.String("dir", "sql", "the directory of the statement files")
	out := flag.String("out", "queries.gen.go", "the file to write")
	// go generate sets GOPACKAGE to the package of the file it runs for.
	pkg := flag.String("pkg", os.Getenv("GOPACKAGE"), "the package of the generated file")
	flag.Parse()
	if err := run(*dir, *out, *pkg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dir, out, pkg string) error {
	if pkg == "" {
		return fmt.Errorf("sqlgen: no package: pass -pkg or run it from go generate")
	}
	src, err := sqlgen.GenerateDir(dir, pkg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, src, 0o644); err != nil {
		return fmt.Errorf("sqlgen: %w", err)
	}
	return nil
}
