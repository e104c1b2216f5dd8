package sqlgen

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerated: testdata/good/queries.gen.go is what the generator makes
// of testdata/good (run go generate in this package after changing either),
// which also proves Check accepts a fresh file.
//
//go:generate go run ./cmd/sqlgen -dir testdata/good -out testdata/good/queries.gen.go -pkg store
func TestGenerated(t *testing.T) {
	if err := Check("testdata/good", "testdata/good/queries.gen.go"); err != nil {
		t.Fatal(err)
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, err := GenerateDir("testdata/good", "store")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if b, _ := GenerateDir("testdata/good", "store"); string(b) != string(a) {
			t.Fatal("two runs made different code")
		}
	}
}

// TestCheckReportsStale: a statement changed after the generation is
// reported, with the lines that changed.
func TestCheckReportsStale(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"item.sql", "touch_items.sql"} {
		copyFile(t, filepath.Join("testdata/good", f), filepath.Join(dir, f))
	}
	gen := filepath.Join(dir, "queries.gen.go")
	src, err := GenerateDir(dir, "store")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, gen, string(src))
	if err := Check(dir, gen); err != nil {
		t.Fatalf("fresh file: %v", err)
	}

	item := filepath.Join(dir, "item.sql")
	b, err := os.ReadFile(item)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, item, strings.Replace(string(b), "SELECT name", "SELECT upper(name)", 1))
	err = Check(dir, gen)
	if err == nil {
		t.Fatal("a stale file passed")
	}
	line := strings.Count(string(src[:strings.Index(string(src), "SELECT name FROM")]), "\n") + 1
	for _, want := range []string{
		"queries.gen.go is stale, run go generate",
		fmt.Sprintf("-%d: SELECT name FROM", line),
		fmt.Sprintf("+%d: SELECT upper(name) FROM", line),
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestDiff(t *testing.T) {
	got := diff("a\nb\nc\nd\n", "a\nc\nx\nd\n")
	if want := "-2: b\n+3: x\n"; got != want {
		t.Errorf("diff\n%s\nwant\n%s", got, want)
	}
}

// TestCompile builds the code generated from testdata/good in a package
// beside a Queries type as the store declares it: the generated code
// type-checks and vets. The store's own build and tests cover the real
// statements.
func TestCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet")
	}
	src, err := GenerateDir("testdata/good", "store")
	if err != nil {
		t.Fatal(err)
	}
	// Inside the module, so that its imports resolve; under testdata, so
	// that ./... never sees it.
	pkg, err := os.MkdirTemp("testdata", "compile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pkg) })
	writeFile(t, filepath.Join(pkg, "queries.gen.go"), string(src))
	writeFile(t, filepath.Join(pkg, "store.go"), storeStub)
	// The array parameter types and the row collector are the
	// package's own, as they are.
	for _, f := range []string{"arrays.go", "rows.go"} {
		copyFile(t, filepath.Join("..", "..", f), filepath.Join(pkg, f))
	}
	out, err := exec.Command("go", "vet", "./"+filepath.ToSlash(pkg)).CombinedOutput()
	if err != nil {
		t.Fatalf("go vet: %v\n%s", err, out)
	}
}

// storeStub is the hand-written half the generated code needs.
const storeStub = `package store

// Queries runs the statements of one schema.
type Queries struct{ text Texts }

// New returns the statements of the schema whose quoted name is ident.
func New(ident string) *Queries { return &Queries{text: newTexts(ident)} }
`

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
