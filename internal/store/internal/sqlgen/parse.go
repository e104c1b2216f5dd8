package sqlgen

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Statement is one statement file, parsed.
type Statement struct {
	Name string // the header's snake_case name, which is the file's base name
	File string // the file's base name, "claim.sql"
	Kind string // ":one", ":many", ":exec" or ":execrows"
	Mode string // the pgx.QueryExecMode constant it runs with, "" for the connection's
	// Capacity is the parameter a :many method sizes its slice of rows
	// with, "" for none.
	Capacity string
	Named    bool // parameters are @name: the method takes a params struct
	Params   []Field
	// Columns are the declared result columns, in order (:one and :many).
	Columns []Field
	// Text is what the server receives, {schema} still in place: the
	// "-- name: <name>" line, then the file without its header lines and
	// with @name parameters numbered.
	Text string
	// Multi is set for a text of several statements (a script), which
	// cannot be prepared and so takes no parameters.
	Multi bool
}

// Field is a parameter or a result column.
type Field struct {
	Name    string // snake_case
	SQLType string // as declared or cast: "text[]", "double precision"
	Null    bool
	GoType  string
	line    int // of its declaration or first use, for errors
}

// kinds are the result kinds of sqlc's convention that the generator knows.
var kinds = []string{":one", ":many", ":exec", ":execrows"}

// modes maps a header's "-- mode:" to the pgx.QueryExecMode it passes as the
// first argument, for the statements that must not run as the connection's
// cached prepared statement (planned with their values, say).
var modes = map[string]string{
	"cache_statement": "QueryExecModeCacheStatement",
	"cache_describe":  "QueryExecModeCacheDescribe",
	"describe_exec":   "QueryExecModeDescribeExec",
	"exec":            "QueryExecModeExec",
	"simple_protocol": "QueryExecModeSimpleProtocol",
}

// ParseDir parses every *.sql file of dir, in the order of their names.
func ParseDir(dir string) ([]Statement, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("sqlgen: list %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("sqlgen: no .sql files in %s", dir)
	}
	slices.Sort(files)
	stmts := make([]Statement, 0, len(files))
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("sqlgen: %w", err)
		}
		s, err := Parse(filepath.Base(f), string(src))
		if err != nil {
			return nil, fmt.Errorf("sqlgen: %w", err)
		}
		stmts = append(stmts, s)
	}
	return stmts, nil
}

// Parse parses the statement file called file (its base name) with content
// src. Errors begin with "file:line:".
func Parse(file, src string) (Statement, error) {
	p := parser{file: file, st: Statement{File: file}}
	if err := p.header(src); err != nil {
		return Statement{}, err
	}
	if err := p.params(src); err != nil {
		return Statement{}, err
	}
	if err := p.columns(); err != nil {
		return Statement{}, err
	}
	return p.st, nil
}

type parser struct {
	file string
	st   Statement
	// cut are the byte ranges of the header lines, left out of the text.
	cut                [][2]int
	nameLine           int
	paramDecls         []decl
	returnDecls        []decl
	paramLine, retLine int
	capacityLine       int
}

// header reads the header lines of the leading comment block.
func (p *parser) header(src string) error {
	line := 0
	for off := 0; off < len(src); {
		end := strings.IndexByte(src[off:], '\n') + off + 1
		if end == off {
			end = len(src)
		}
		line++
		text := strings.TrimRight(src[off:end], "\r\n")
		trimmed := strings.TrimSpace(text)
		if trimmed != "" && !strings.HasPrefix(trimmed, "--") {
			break // the SQL begins
		}
		key, value, isHeader := headerLine(text)
		if isHeader {
			p.cut = append(p.cut, [2]int{off, end})
			if err := p.headerValue(key, value, line); err != nil {
				return err
			}
		}
		off = end
	}
	if p.nameLine == 0 {
		return p.errorf(1, "no \"-- name: <name> :one|:many|:exec|:execrows\" line before the SQL")
	}
	switch hasRows := p.st.Kind == ":one" || p.st.Kind == ":many"; {
	case hasRows && p.retLine == 0:
		return p.errorf(p.nameLine, "%s needs a \"-- returns:\" line declaring its columns", p.st.Kind)
	case !hasRows && p.retLine != 0:
		return p.errorf(p.retLine, "%s returns no rows: drop the \"-- returns:\" line or use :one or :many", p.st.Kind)
	}
	return nil
}

// headerLine splits "-- key: value" for the keys of the header.
func headerLine(line string) (key, value string, ok bool) {
	rest, ok := strings.CutPrefix(line, "-- ")
	if !ok {
		return "", "", false
	}
	key, value, ok = strings.Cut(rest, ":")
	switch key {
	case "name", "params", "returns", "mode", "capacity":
		return key, strings.TrimSpace(value), ok
	}
	return "", "", false
}

func (p *parser) headerValue(key, value string, line int) error {
	var err error
	switch key {
	case "name":
		if p.nameLine != 0 {
			return p.errorf(line, "a second \"-- name:\" line (the first is line %d)", p.nameLine)
		}
		p.nameLine = line
		f := strings.Fields(value)
		want := strings.TrimSuffix(p.file, ".sql")
		switch {
		case len(f) != 2 || !slices.Contains(kinds, f[1]):
			return p.errorf(line, "want \"-- name: <name> :one|:many|:exec|:execrows\", got %q", "-- name: "+value)
		case f[0] != want:
			return p.errorf(line, "statement %q is in file %s: name the file %s.sql, or the statement %s", f[0], p.file, f[0], want)
		}
		p.st.Name, p.st.Kind = f[0], f[1]
	case "mode":
		mode, ok := modes[value]
		if !ok {
			return p.errorf(line, "unknown mode %q (known: %s)", value, strings.Join(slices.Sorted(maps.Keys(modes)), ", "))
		}
		p.st.Mode = mode
	case "capacity":
		p.st.Capacity, p.capacityLine = value, line
	case "params":
		if p.paramLine == 0 {
			p.paramLine = line
		}
		p.paramDecls, err = p.appendDecls(p.paramDecls, value, line, false)
	case "returns":
		if p.retLine == 0 {
			p.retLine = line
		}
		p.returnDecls, err = p.appendDecls(p.returnDecls, value, line, true)
	}
	return err
}

// decl is one entry of a "-- params:" or "-- returns:" list:
// name [sql type] [null] [as <Go type>].
type decl struct {
	name, sqlType, goType string
	null                  bool
	line                  int
}

// appendDecls parses a comma-separated list of declarations; a list may go
// on over several lines of the same key. Columns need their SQL type (the
// database check compares it); parameters may take theirs from a cast.
func (p *parser) appendDecls(decls []decl, list string, line int, needType bool) ([]decl, error) {
	for entry := range strings.SplitSeq(list, ",") {
		f := strings.Fields(entry)
		if len(f) == 0 {
			return nil, p.errorf(line, "empty declaration in %q", list)
		}
		d := decl{name: f[0], line: line}
		if !validName(d.name) {
			return nil, p.errorf(line, "%q is not a snake_case name", d.name)
		}
		f = f[1:]
		if i := slices.Index(f, "as"); i >= 0 {
			if i != len(f)-2 {
				return nil, p.errorf(line, "%s: want \"as <Go type>\" at the end, got %q", d.name, strings.TrimSpace(entry))
			}
			d.goType, f = f[i+1], f[:i]
		}
		if n := len(f); n > 0 && strings.EqualFold(f[n-1], "null") {
			d.null, f = true, f[:n-1]
		}
		d.sqlType = strings.ToLower(strings.Join(f, " "))
		if needType && d.sqlType == "" {
			return nil, p.errorf(line, "column %s has no SQL type", d.name)
		}
		decls = append(decls, d)
	}
	return decls, nil
}

// params finds the statement's parameters, numbers @name ones, resolves
// every parameter's type and builds the text.
func (p *parser) params(src string) error {
	refs, multi := scan(src, 1)
	p.st.Multi = multi
	switch {
	case multi && len(refs) > 0:
		return p.errorf(refs[0].line, "a text of several statements cannot take parameters")
	case multi && p.st.Kind != ":exec":
		return p.errorf(p.nameLine, "a text of several statements can only be :exec")
	}
	named := slices.IndexFunc(refs, func(r ref) bool { return r.named })
	positional := slices.IndexFunc(refs, func(r ref) bool { return !r.named })
	if named >= 0 && positional >= 0 {
		return p.errorf(refs[max(named, positional)].line, "mixes $n and @name parameters: use one kind")
	}
	p.st.Named = named >= 0

	// index is each parameter's number: its $n, or its @name's order of
	// first appearance.
	index := map[string]int{}
	var params []Field
	for _, t := range refs {
		n, seen := index[t.name]
		if !seen {
			if p.st.Named {
				n = len(params) + 1
			} else {
				var err error
				if n, err = strconv.Atoi(t.name); err != nil || n == 0 {
					return p.errorf(t.line, "bad parameter $%s", t.name)
				}
			}
			index[t.name] = n
			for len(params) < n {
				params = append(params, Field{})
			}
			params[n-1] = Field{Name: t.name, line: t.line}
		}
		f := &params[n-1]
		switch {
		case t.cast == "":
		case f.SQLType == "":
			f.SQLType = t.cast
		case f.SQLType != t.cast:
			return p.errorf(t.line, "parameter %s is cast to %s here and to %s before", paramRef(t.name, t.named), t.cast, f.SQLType)
		}
	}
	for i, f := range params {
		if f.line == 0 {
			return p.errorf(p.nameLine, "parameter $%d is never used, but a later one is", i+1)
		}
	}
	if err := p.applyParamDecls(params); err != nil {
		return err
	}
	if err := p.checkCapacity(params); err != nil {
		return err
	}
	p.st.Params = params
	p.st.Text = p.text(src, refs, index)
	return nil
}

// applyParamDecls merges the "-- params:" declarations into params: by
// position for $n parameters (they name them), by name for @name ones.
func (p *parser) applyParamDecls(params []Field) error {
	if !p.st.Named && len(params) > 0 && len(p.paramDecls) != len(params) {
		return p.errorf(max(p.paramLine, p.nameLine), "%d $n parameters but %d declared in \"-- params:\": name each, in order", len(params), len(p.paramDecls))
	}
	if len(params) == 0 && len(p.paramDecls) > 0 {
		return p.errorf(p.paramLine, "\"-- params:\" declares parameters the statement does not use")
	}
	for i, d := range p.paramDecls {
		j := i
		if p.st.Named {
			j = slices.IndexFunc(params, func(f Field) bool { return f.Name == d.name })
			if j < 0 {
				return p.errorf(d.line, "\"-- params:\" declares %s, which the statement does not use as @%s", d.name, d.name)
			}
		}
		f := &params[j]
		if d.sqlType != "" && f.SQLType != "" && d.sqlType != f.SQLType {
			return p.errorf(d.line, "parameter %s is declared %s but cast to %s", paramRef(f.Name, p.st.Named), d.sqlType, f.SQLType)
		}
		// A $n parameter becomes a method argument: its name must be free.
		if !p.st.Named && takenName(goName(d.name, false)) {
			return p.errorf(d.line, "parameter $%d: the name %s is taken in the generated code: choose another", i+1, d.name)
		}
		f.Name, f.Null, f.GoType = d.name, d.null, d.goType
		if d.sqlType != "" {
			f.SQLType = d.sqlType
		}
	}
	for i := range params {
		f := &params[i]
		ref := "@" + f.Name
		if !p.st.Named {
			ref = "$" + strconv.Itoa(i+1)
		}
		if f.SQLType == "" {
			return p.errorf(f.line, "parameter %s has no type: cast it (%s::<type>) or declare it in \"-- params:\"", ref, ref)
		}
		if err := p.resolve(f, "parameter "+ref); err != nil {
			return err
		}
	}
	return p.unique(params, "parameter")
}

// checkCapacity checks that "-- capacity:" names an integer parameter of
// a :many statement.
func (p *parser) checkCapacity(params []Field) error {
	if p.st.Capacity == "" {
		return nil
	}
	if p.st.Kind != ":many" {
		return p.errorf(p.capacityLine, "only a :many statement returns a slice to size")
	}
	i := slices.IndexFunc(params, func(f Field) bool { return f.Name == p.st.Capacity })
	if i < 0 {
		return p.errorf(p.capacityLine, "capacity %s is not a parameter", p.st.Capacity)
	}
	switch params[i].GoType {
	case "int", "int64", "int32", "int16":
		return nil
	}
	return p.errorf(p.capacityLine, "capacity %s is a %s, not an integer", p.st.Capacity, params[i].GoType)
}

// columns resolves the declared result columns.
func (p *parser) columns() error {
	for _, d := range p.returnDecls {
		f := Field{Name: d.name, SQLType: d.sqlType, Null: d.null, GoType: d.goType, line: d.line}
		if err := p.resolve(&f, "column "+d.name); err != nil {
			return err
		}
		p.st.Columns = append(p.st.Columns, f)
	}
	return p.unique(p.st.Columns, "column")
}

// resolve sets f.GoType from its SQL type, its override and its
// nullability.
func (p *parser) resolve(f *Field, what string) error {
	t, err := goType(f.SQLType, f.GoType, f.Null)
	if err != nil {
		return p.errorf(f.line, "%s: %v", what, err)
	}
	if _, err := typeImports(t); err != nil {
		return p.errorf(f.line, "%s: %v", what, err)
	}
	f.GoType = t
	return nil
}

// unique checks that no two fields share a Go name.
func (p *parser) unique(fields []Field, what string) error {
	seen := map[string]bool{}
	for _, f := range fields {
		name := goName(f.Name, true)
		if seen[name] {
			return p.errorf(f.line, "two %ss are called %s", what, name)
		}
		seen[name] = true
	}
	return nil
}

// text is src without the header lines and with every @name replaced by
// its $n, under the "-- name:" line the server sees.
func (p *parser) text(src string, refs []ref, index map[string]int) string {
	var b strings.Builder
	b.WriteString("-- name: " + p.st.Name + "\n")
	off := 0
	for _, c := range p.cut {
		b.WriteString(src[off:c[0]])
		off = c[1]
	}
	if p.st.Named {
		// Every parameter follows the header, which is comment lines.
		for _, r := range refs {
			b.WriteString(src[off:r.start])
			b.WriteString("$" + strconv.Itoa(index[r.name]))
			off = r.end
		}
	}
	b.WriteString(src[off:])
	return b.String()
}

// paramRef is how the statement spells a parameter: $3 or @name.
func paramRef(name string, named bool) string {
	if named {
		return "@" + name
	}
	return "$" + name
}

func (p *parser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.file, line, fmt.Sprintf(format, args...))
}

// validName reports whether s is a snake_case name: lower-case letters,
// digits and underscores, not starting with a digit.
func validName(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || i > 0 && isDigit(c)) {
			return false
		}
	}
	return s != ""
}
