package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: `outboxd version` and `outboxd --version` print the module
// version, the VCS revision and the Go version from the build information.
// The binary is built as `make build` builds it; from a git checkout (as in
// CI) its revision must be the checkout's HEAD. (Go cannot stamp a revision
// in a `git worktree`, whose .git is a file: there it says unknown.)
func TestVersion(t *testing.T) {
	t.Parallel()
	e := &env{t: t, config: filepath.Join(t.TempDir(), "none.yaml")}
	out := e.mustRun("version")
	if flag := e.mustRun("--version"); flag != out {
		t.Errorf("--version printed %q, version printed %q", flag, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "outboxd version ") || lines[0] == "outboxd version " ||
		!strings.HasPrefix(lines[1], "revision: ") || lines[2] != "go: "+runtime.Version() {
		t.Fatalf("version output:\n%s\nwant: outboxd version <module version>, revision: <git revision>, go: %s", out, runtime.Version())
	}
	if fi, err := os.Stat(filepath.Join("..", "..", ".git")); err == nil && fi.IsDir() {
		head, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			t.Fatal(err)
		}
		if want := "revision: " + strings.TrimSpace(string(head)); !strings.HasPrefix(lines[1], want) {
			t.Errorf("version printed %q, want %q (the checkout's HEAD)", lines[1], want)
		}
	} else {
		t.Logf("not a plain git checkout (worktree or export): revision %q not compared", lines[1])
	}
}
