package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testName is a test, fuzz target or benchmark as docs/guarantees.md
// names the proof of a promise.
var testName = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*`)

// testFunc is the declaration of a test, fuzz target or benchmark.
var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)\(`)

// TestEveryGuaranteeNamesATestThatExists: each test docs/guarantees.md
// names as a promise's proof is a function of some _test.go file of the
// repository, so a renamed or deleted test cannot leave a promise proved
// by nothing. (Mutation: a guarantee naming TestNoSuchProof fails this
// test.)
func TestEveryGuaranteeNamesATestThatExists(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "guarantees.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, n := range testName.FindAllString(string(doc), -1) {
		named[n] = true
	}
	if len(named) == 0 {
		t.Fatal("docs/guarantees.md names no test")
	}
	defined := map[string]bool{}
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != repoRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for n := range named {
		if !defined[n] {
			t.Errorf("docs/guarantees.md names %s, which no _test.go file defines", n)
		}
	}
}
