package api

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/testenv"
)

// validatorDir holds the independent validator's package.json, its lock
// file and validate.js.
const validatorDir = "testdata/openapi-validator"

// validatorCache is where npm installs the validator: once, and again only
// when the lock file changes.
func validatorCache(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(cache, "outboxd", "openapi-validator")
}

// installValidator installs @apidevtools/swagger-parser, as pinned by
// validatorDir's lock file, into the cache with `npm ci`, unless the cache
// already holds that lock file's install; it returns the directory to run
// validate.js in. Without node or npm, or when npm cannot install, the
// test skips (fails in CI).
func installValidator(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipOrFail(t, fmt.Sprintf("node is not installed: %v", err))
	}
	dir = validatorCache(t)
	lock, err := os.ReadFile(filepath.Join(validatorDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(dir, "node_modules", ".outboxd-installed-lock.json")
	if have, err := os.ReadFile(installed); err == nil && bytes.Equal(have, lock) {
		return node, dir
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		testenv.SkipOrFail(t, fmt.Sprintf("npm is not installed: %v", err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"package.json", "package-lock.json"} {
		raw, err := os.ReadFile(filepath.Join(validatorDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		testenv.SkipOrFail(t, fmt.Sprintf("npm ci of the OpenAPI validator in %s: %v\n%s", dir, err, out))
	}
	if err := os.WriteFile(installed, lock, 0o644); err != nil {
		t.Fatal(err)
	}
	return node, dir
}

// TestOpenAPIDocumentIsValid checks openapi.json with a validator
// independent of kin-openapi: @apidevtools/swagger-parser, from npm. A
// broken copy of the document (without its info object, with a $ref to a
// schema that does not exist) must fail it, so that a validator that
// accepts anything would not pass this test.
// Mutation: removing "info" from openapi.json, or a $ref to a missing
// component, makes this fail.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	node, dir := installValidator(t)
	script, err := filepath.Abs(filepath.Join(validatorDir, "validate.js"))
	if err != nil {
		t.Fatal(err)
	}
	document, err := filepath.Abs("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	validate := func(file string) (string, error) {
		cmd := exec.Command(node, script, file)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := validate(document); err != nil || !strings.Contains(out, "valid "+document+" 3.1") {
		t.Fatalf("swagger-parser: %v\n%s", err, out)
	}
	for name, breakIt := range map[string]func(string) string{
		"no info": func(doc string) string { return strings.Replace(doc, `"info": {`, `"nfo": {`, 1) },
		"a $ref to nothing": func(doc string) string {
			return strings.Replace(doc, `"#/components/schemas/Stats"`, `"#/components/schemas/Missing"`, 1)
		},
	} {
		broken := breakIt(string(openAPIDocument))
		if broken == string(openAPIDocument) {
			t.Fatalf("%s: the document did not change", name)
		}
		file := filepath.Join(t.TempDir(), "openapi.json")
		if err := os.WriteFile(file, []byte(broken), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := validate(file); err == nil {
			t.Errorf("%s: swagger-parser accepted a broken document:\n%s", name, out)
		}
	}
}
