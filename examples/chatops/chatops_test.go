package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatOpsBuildKnowsOnlyItsSinkTypes builds the binary and checks
// configurations with it: the four types it registers are valid, with
// their secrets redacted by config show, and a built-in type it left out
// (email) is an unknown type naming the registered ones. (Mutation: main
// registering nobrokers' types makes the email configuration valid and
// fails this test.)
func TestChatOpsBuildKnowsOnlyItsSinkTypes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "chatops")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	write := func(name, yaml string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	chat := write("chat.yaml", `sinks:
  audit: {type: log}
  ops-slack: {type: slack, options: {token: xoxb-secret-1, channel: C0123ABCD}}
  ops-teams: {type: teams, options: {url: "https://example.com/workflows/x?sig=teams-secret"}}
  chat: {type: mattermost, options: {url: "https://mm.example.com/hooks/mattermost-secret"}}
`)
	if out, err := exec.Command(bin, "config", "check", "--config", chat).CombinedOutput(); err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "config", "show", "--config", chat).CombinedOutput()
	if err != nil {
		t.Fatalf("config show: %v\n%s", err, out)
	}
	for _, secret := range []string{"xoxb-secret-1", "teams-secret", "mattermost-secret"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("config show shows the secret %s:\n%s", secret, out)
		}
	}

	mail := write("mail.yaml", "sinks:\n  mail: {type: email, options: {smtp: 'm:25', from: a@example.com}}\n")
	out, err = exec.Command(bin, "config", "check", "--config", mail).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown sink type "email"`) || !strings.Contains(string(out), "log, mattermost, slack, teams") {
		t.Errorf("config check of an email sink: %v\n%s\nwant the unknown type and the four registered ones", err, out)
	}
}
