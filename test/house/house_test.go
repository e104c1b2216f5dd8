// Package house_test keeps the module's floors apart. The top-level folders
// ("rooms") stand on floors, bottom to top, and production code imports only
// down or across its own floor: an upward import ties a lower room to what is
// built on it, so that neither can change or be read alone. The tests read
// the import graph from `go list -deps -json` of the whole module and fail on
// an upward import, on foundations in internal/ that import the engine or
// anything above, on production code that uses test support or links
// package testing, and on a package other than a custom build's main that
// imports the command package.
//
// Checked by mutation, each in a copy of the tree: an import of server/jsonl
// added to internal/safetext failed TestNoImportRunsUpward (internal ->
// server) and TestInternalHoldsFoundationsOnly; an import of
// internal/testkit/testenv added to server/console failed
// TestNoImportRunsUpward (server -> internal/testkit) and
// TestProductionUsesNoTestSupport (the import, and package testing linked
// through it by console and every package above it); an external test of
// server/console importing cmd failed TestOnlyCustomBuildsImportTheCommands;
// a package in a new top-level folder failed TestNoImportRunsUpward (no
// floor).
package house_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The rooms that the rules below name.
const (
	// root is the room of the module's root package.
	root = "."
	// foundations is internal/, less test support.
	foundations = "internal"
	// commands is the room of the command package.
	commands = "cmd"
	// customBuilds is where the main packages that run the commands
	// (cmd.Main) live, besides cmd/outboxd.
	customBuilds = "examples"
	// tests holds the suites that test across packages.
	tests = "test"
	// testkit is test support, a room inside internal/.
	testkit = "internal/testkit"
)

// floors are the module's rooms, bottom to top: a room is a top-level
// folder, the root package (root), or a folder named by a longer path
// (testkit), which takes its packages out of the shorter one's (internal).
// Production code may import its own floor and the floors below it.
var floors = [][]string{
	// Leaves that import nothing of outboxd's: plugins.yaml's key
	// declarations, Standard Webhooks signing, which sinks and
	// destinations share, the guarded outbound HTTP client (the network
	// policy both obey), and the status words (row statuses, breaker
	// states) every floor spells through.
	{"confschema", "standardwebhooks", "netguard", "core/status"},
	// Foundations: the store and its SQL, the scrubber of secrets, the
	// sanitizer of outside text, access control, the instrumentation
	// scope, the relay's test signals.
	{foundations},
	// The engine: the sink contract, the relay and its services, the
	// operator, migrations, the audit trail.
	{"core"},
	// Routes, templates and digests: a relay stage.
	{"routing"},
	// Tenants' endpoints: their store, directory, fan-out and portal data.
	{"destinations"},
	// The front door: the producer API and the engine's constructor.
	{root},
	// Sink type name -> definition; decodes and documents options.
	{"registry"},
	// The integrations, what they share, and the list of built-in types.
	{"sinks"},
	// plugins.yaml: loading, positions, ${VAR}, effective and redacted output.
	{"config"},
	// The daemon: lifecycle, configuration generations, reload, the HTTP
	// mux, and beneath it the API, the console and telemetry.
	{"server"},
	// The cobra commands, and cmd.Main for custom builds.
	{commands},
	// Built on everything: example programs (custom builds, receivers), the
	// suites that test across packages, and test support.
	{customBuilds, tests, testkit},
}

// testSupport are the folders that hold tests and test support only: the
// rooms of the test suites and of outboxd's own test support, and the public
// test kit of sink authors (core/sink/sinktest), whose checks take a
// *testing.T. They may link package testing, and no production package may
// import them.
var testSupport = []string{tests, testkit, "core/sink/sinktest"}

// goPackage is what the tests read of a package in `go list -json`.
type goPackage struct {
	ImportPath   string
	Name         string
	Imports      []string // production code's imports
	TestImports  []string
	XTestImports []string
	Deps         []string // production code's dependencies, transitively
	Module       *struct {
		Path string
		Main bool
	}
}

// module is the import graph of the main module's packages.
type module struct {
	path     string
	packages []*goPackage          // the main module's, sorted by import path
	byPath   map[string]*goPackage // every package, dependencies included
}

// loadModule lists the module's packages once for all the tests.
var loadModule = sync.OnceValues(func() (*module, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMOD: %w", err)
	}
	list := exec.Command("go", "list", "-deps", "-json=ImportPath,Name,Imports,TestImports,XTestImports,Deps,Module", "./...")
	list.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	out, err := list.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, fmt.Errorf("go list: %w\n%s", err, exit.Stderr)
		}
		return nil, fmt.Errorf("go list: %w", err)
	}
	m := &module{byPath: map[string]*goPackage{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(goPackage)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list's output: %w", err)
		}
		m.byPath[p.ImportPath] = p
		if p.Module != nil && p.Module.Main {
			m.path = p.Module.Path
			m.packages = append(m.packages, p)
		}
	}
	if m.path == "" {
		return nil, errors.New("go list found no package of the main module")
	}
	slices.SortFunc(m.packages, func(a, b *goPackage) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	return m, nil
})

// load returns the module's import graph, failing t if it cannot be listed.
func load(t *testing.T) *module {
	t.Helper()
	m, err := loadModule()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// inModule reports whether importPath is one of the module's packages.
func (m *module) inModule(importPath string) bool {
	return importPath == m.path || strings.HasPrefix(importPath, m.path+"/")
}

// rel returns the folder of one of the module's packages, root for the
// root package.
func (m *module) rel(importPath string) string {
	if importPath == m.path {
		return root
	}
	return strings.TrimPrefix(importPath, m.path+"/")
}

// in reports whether folder rel is folder or inside it.
func in(rel, folder string) bool {
	return rel == folder || strings.HasPrefix(rel, folder+"/")
}

// testSupport reports whether one of the module's packages is test support.
func (m *module) testSupport(importPath string) bool {
	rel := m.rel(importPath)
	return slices.ContainsFunc(testSupport, func(folder string) bool { return in(rel, folder) })
}

// room returns the room of one of the module's packages and its floor
// (0 at the bottom), or floor -1 and the package's top-level folder when
// no room holds it.
func (m *module) room(importPath string) (string, int) {
	rel := m.rel(importPath)
	best, floor := "", -1
	for f, rooms := range floors {
		for _, r := range rooms {
			if in(rel, r) && len(r) > len(best) {
				best, floor = r, f
			}
		}
	}
	if floor < 0 {
		best, _, _ = strings.Cut(rel, "/")
	}
	return best, floor
}

// describe names a room and its floor, counted from 1 at the bottom.
func describe(room string, floor int) string {
	return fmt.Sprintf("%s (floor %d of %d)", room, floor+1, len(floors))
}

// TestNoImportRunsUpward fails on each pair of rooms where production code
// of the lower one imports the higher one, with the first such import, and
// on each top-level folder that has no floor.
func TestNoImportRunsUpward(t *testing.T) {
	t.Parallel()
	m := load(t)
	type pair struct {
		from, to           string
		fromFloor, toFloor int
	}
	examples, counts := map[pair]string{}, map[pair]int{}
	var pairs []pair
	homeless := map[string]bool{}
	for _, p := range m.packages {
		from, fromFloor := m.room(p.ImportPath)
		if fromFloor < 0 {
			if !homeless[from] {
				homeless[from] = true
				t.Errorf("%s is in the folder %s, which has no floor: add it to floors", p.ImportPath, from)
			}
			continue
		}
		for _, imp := range p.Imports {
			if !m.inModule(imp) {
				continue
			}
			to, toFloor := m.room(imp)
			if toFloor <= fromFloor {
				continue
			}
			k := pair{from, to, fromFloor, toFloor}
			if counts[k] == 0 {
				pairs = append(pairs, k)
				examples[k] = p.ImportPath + " -> " + imp
			}
			counts[k]++
		}
	}
	for _, k := range pairs {
		t.Errorf("upward import: %s -> %s, %d import(s), e.g. %s",
			describe(k.from, k.fromFloor), describe(k.to, k.toFloor), counts[k], examples[k])
	}
}

// TestInternalHoldsFoundationsOnly fails on each production import from
// internal/ (test support aside) of the engine or anything above it:
// internal/ holds what every floor may use, so it may use none of them.
func TestInternalHoldsFoundationsOnly(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, p := range m.packages {
		room, internalFloor := m.room(p.ImportPath)
		if room != foundations {
			continue
		}
		for _, imp := range p.Imports {
			if !m.inModule(imp) {
				continue
			}
			if to, floor := m.room(imp); floor > internalFloor {
				t.Errorf("internal/ holds foundations only, but %s imports %s, of %s", p.ImportPath, imp, describe(to, floor))
			}
		}
	}
}

// TestProductionUsesNoTestSupport fails on each production package (outside
// testSupport) that imports test support or links package testing.
func TestProductionUsesNoTestSupport(t *testing.T) {
	t.Parallel()
	m := load(t)
	for _, p := range m.packages {
		if m.testSupport(p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if m.inModule(imp) && m.testSupport(imp) {
				t.Errorf("production package %s imports test support %s", p.ImportPath, imp)
			}
		}
		if slices.Contains(p.Deps, "testing") {
			t.Errorf("production package %s links package testing, through %s", p.ImportPath, m.linksTesting(p))
		}
	}
}

// linksTesting returns p's imports through which p links package testing.
func (m *module) linksTesting(p *goPackage) string {
	var through []string
	for _, imp := range p.Imports {
		if dep, ok := m.byPath[imp]; imp == "testing" || ok && slices.Contains(dep.Deps, "testing") {
			through = append(through, imp)
		}
	}
	return strings.Join(through, ", ")
}

// TestOnlyCustomBuildsImportTheCommands fails on each package outside cmd
// that imports the command package, in production code or in tests: the
// commands are the top of the daemon, and only the main package of a
// custom build (cmd/outboxd, examples/*) runs them, through cmd.Main.
func TestOnlyCustomBuildsImportTheCommands(t *testing.T) {
	t.Parallel()
	m := load(t)
	cmd := m.path + "/" + commands
	for _, p := range m.packages {
		room, _ := m.room(p.ImportPath)
		if room == commands || room == customBuilds && p.Name == "main" {
			continue
		}
		for _, imports := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			if slices.Contains(imports, cmd) {
				t.Errorf("%s imports the command package %s; only cmd and the main packages of custom builds (cmd/outboxd, examples/*) may", p.ImportPath, cmd)
				break
			}
		}
	}
}
