package sqlgen

import (
	"fmt"
	"strings"
)

// goTypes maps PostgreSQL type names, as written in casts and declarations,
// to the Go type pgx encodes and scans them with. Types it lacks (numeric,
// say, whose right Go type depends on its use) need an "as" in the header.
var goTypes = map[string]string{
	"bigint": "int64", "int8": "int64",
	"integer": "int32", "int": "int32", "int4": "int32",
	"smallint": "int16", "int2": "int16",
	"boolean": "bool", "bool": "bool",
	"double precision": "float64", "float8": "float64",
	"real": "float32", "float4": "float32",
	"text": "string", "varchar": "string", "character varying": "string",
	"jsonb": "[]byte", "json": "[]byte", "bytea": "[]byte",
	"timestamptz": "time.Time", "timestamp with time zone": "time.Time",
	"timestamp": "time.Time", "timestamp without time zone": "time.Time",
	"date":     "time.Time",
	"interval": "time.Duration",
	"uuid":     "uuid.UUID",
}

// multiWordTypes are the type names of goTypes written as several words,
// which a cast scan must read past the first word.
var multiWordTypes = func() []string {
	var names []string
	for name := range goTypes {
		if strings.Contains(name, " ") {
			names = append(names, name)
		}
	}
	return names
}()

// imports maps the package qualifiers a Go type may use to their import
// paths; a header naming another package is an error, not a guess.
var imports = map[string]string{
	"time":   "time",
	"uuid":   "github.com/google/uuid",
	"json":   "encoding/json",
	"pgtype": "github.com/jackc/pgx/v5/pgtype",
	"netip":  "net/netip",
}

// goType is the Go type of a value of SQL type sqlType ("text[]" for an
// array), or override when the header gave one; a nullable value is a
// pointer unless its type already has a nil (slices, maps, pointers).
func goType(sqlType, override string, null bool) (string, error) {
	t := override
	if t == "" {
		// A two-dimensional array's element ("text[]") is in no map either.
		elem, array := strings.CutSuffix(sqlType, "[]")
		base, ok := goTypes[elem]
		if !ok {
			return "", fmt.Errorf("no Go type for SQL type %q: give one with \"as <Go type>\"", sqlType)
		}
		t = base
		if array {
			t = "[]" + base
		}
	}
	if null && !strings.HasPrefix(t, "[]") && !strings.HasPrefix(t, "map[") && !strings.HasPrefix(t, "*") && t != "any" {
		t = "*" + t
	}
	return t, nil
}

// typeImports returns the import paths the Go type t needs.
func typeImports(t string) ([]string, error) {
	var paths []string
	for i := 0; i < len(t); i++ {
		if !isIdentStart(t[i]) {
			continue
		}
		j := i
		for j < len(t) && isIdent(t[j]) {
			j++
		}
		if j < len(t) && t[j] == '.' {
			path, ok := imports[t[i:j]]
			if !ok {
				return nil, fmt.Errorf("the Go type %q uses package %q, which the generator does not know (known: time, uuid, json, pgtype, netip)", t, t[i:j])
			}
			paths = append(paths, path)
			j++
			for j < len(t) && isIdent(t[j]) {
				j++
			}
		}
		i = j - 1
	}
	return paths, nil
}
