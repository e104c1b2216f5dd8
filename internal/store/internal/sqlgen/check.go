package sqlgen

import (
	"bytes"
	"fmt"
	goparser "go/parser"
	"go/token"
	"os"
	"strings"
)

// maxDiffLines bounds the diff Check reports: enough to see what changed.
const maxDiffLines = 40

// Check regenerates the bindings of the statement files of dir in memory
// and reports, with a diff, when generatedFile differs from them: a
// statement file changed and go generate was not run, or the generated
// file was edited by hand. The package name is taken from generatedFile.
// A package's test calls it as sqlgen.Check("sql", "queries.gen.go").
func Check(dir, generatedFile string) error {
	have, err := os.ReadFile(generatedFile)
	if err != nil {
		return fmt.Errorf("sqlgen: %w", err)
	}
	f, err := goparser.ParseFile(token.NewFileSet(), generatedFile, have, goparser.PackageClauseOnly)
	if err != nil {
		return fmt.Errorf("sqlgen: read the package name: %w", err)
	}
	want, err := GenerateDir(dir, f.Name.Name)
	if err != nil {
		return err
	}
	if bytes.Equal(have, want) {
		return nil
	}
	return fmt.Errorf("sqlgen: %s is stale, run go generate (- is the file, + is what %s/*.sql makes):\n%s",
		generatedFile, dir, diff(string(have), string(want)))
}

// diff returns the lines that differ between a and b, "-" for a's and "+"
// for b's, each with its line number, at most maxDiffLines of them.
func diff(a, b string) string {
	x, y := lines(a), lines(b)
	// A stale file mostly agrees: trimming the common head and tail keeps
	// the table below small.
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	x, y = x[pre:len(x)-suf], y[pre:len(y)-suf]
	// lcs[i][j] is the length of the longest common subsequence of x[i:]
	// and y[j:]: the lines kept.
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	n := 0
	emit := func(sign string, line int, text string) {
		if n < maxDiffLines {
			fmt.Fprintf(&out, "%s%d: %s\n", sign, line, text)
		}
		n++
	}
	for i, j := 0, 0; i < len(x) || j < len(y); {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			emit("-", pre+i+1, x[i])
			i++
		default:
			emit("+", pre+j+1, y[j])
			j++
		}
	}
	if n > maxDiffLines {
		fmt.Fprintf(&out, "... and %d more changed lines\n", n-maxDiffLines)
	}
	return out.String()
}

// lines splits s into lines without their newlines.
func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
