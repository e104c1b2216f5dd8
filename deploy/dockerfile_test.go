package deploy_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfile checks the Dockerfile for what the image must be (no
// Docker engine runs here to build it; deploy/image builds the same layout
// and its test runs it): a build stage and a distroless static final
// stage, a static binary, a non-root user, and the entrypoint and command
// deploy/image uses.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var instructions []string // continuation lines joined, comments dropped
	for _, line := range strings.Split(strings.ReplaceAll(string(raw), "\\\n", " "), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			instructions = append(instructions, line)
		}
	}
	var froms []string
	var final []string // the last stage's instructions
	for _, in := range instructions {
		if strings.HasPrefix(in, "FROM ") {
			froms, final = append(froms, in), nil
		}
		final = append(final, in)
	}
	if len(froms) < 2 || !strings.Contains(froms[0], " AS build") {
		t.Fatalf("want a build stage and a final stage, got %q", froms)
	}
	if !regexp.MustCompile(`^FROM gcr\.io/distroless/static[-a-z0-9]*:nonroot$`).MatchString(froms[len(froms)-1]) {
		t.Errorf("final stage %q: want distroless static (CA certificates, no shell)", froms[len(froms)-1])
	}
	body := strings.Join(instructions, "\n")
	if !strings.Contains(body, "CGO_ENABLED=0 go build") {
		t.Error("the binary is not built with CGO_ENABLED=0")
	}
	for _, want := range []string{
		"COPY --from=build /out/outboxd /usr/local/bin/outboxd",
		"USER 65532:65532",
		`ENTRYPOINT ["/usr/local/bin/outboxd"]`,
		`CMD ["serve"]`,
	} {
		if !strings.Contains(strings.Join(final, "\n"), want) {
			t.Errorf("final stage lacks %q", want)
		}
	}
}
