package sqlgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseNamedParameters(t *testing.T) {
	s := mustParseFile(t, "testdata/good/search_items.sql")
	if !s.Named || s.Kind != ":many" || s.Mode != "QueryExecModeCacheDescribe" {
		t.Errorf("named %v, kind %s, mode %s", s.Named, s.Kind, s.Mode)
	}
	// Numbered in the order of first appearance; types from the casts,
	// nullability and Go types from the params line.
	want := []Field{
		{Name: "owner", SQLType: "text", GoType: "string"},
		{Name: "before", SQLType: "bigint", Null: true, GoType: "*int64"},
		{Name: "tags", SQLType: "text[]", GoType: "[]string"},
		{Name: "limit", SQLType: "integer", GoType: "int32"},
	}
	assertFields(t, "params", s.Params, want)
	for _, frag := range []string{
		"WHERE owner = $1::text AND ($2::bigint IS NULL OR id < $2)",
		"tags && $3::text[] AND note <> '@not_a_param' AND \"@col\" IS NOT NULL",
		"body <> $$ @quoted $$ AND tags <@ tags",
		"LIMIT $4::integer",
		"-- Items of @owner", // comments stay prose
	} {
		if !strings.Contains(s.Text, frag) {
			t.Errorf("text lacks %q:\n%s", frag, s.Text)
		}
	}
	if strings.Contains(s.Text, "-- params:") || strings.Contains(s.Text, "-- returns:") || strings.Contains(s.Text, "-- mode:") {
		t.Errorf("the header is left in the text:\n%s", s.Text)
	}
}

func TestParseColumns(t *testing.T) {
	s := mustParseFile(t, "testdata/good/search_items.sql")
	assertFields(t, "columns", s.Columns, []Field{
		{Name: "id", SQLType: "bigint", GoType: "int64"},
		{Name: "name", SQLType: "text", GoType: "string"},
		{Name: "tags", SQLType: "text[]", GoType: "[]string"},
		{Name: "seen_at", SQLType: "timestamptz", Null: true, GoType: "*time.Time"},
		{Name: "meta", SQLType: "jsonb", GoType: "map[string]string"},
	})
}

// TestParseKeepsText: a statement with $n parameters reaches the server as
// before the header existed: "-- name: <name>" and the file, header lines
// left out wherever they stand among the leading comments.
func TestParseKeepsText(t *testing.T) {
	s := mustParseFile(t, "testdata/good/item.sql")
	want := "-- name: item\n" +
		"-- The item with id $1: a short statement keeps $n parameters, named in\n" +
		"-- order by its params line.\n" +
		"SELECT name FROM {schema}.items WHERE id = $1\n"
	if s.Text != want {
		t.Errorf("text\n%q\nwant\n%q", s.Text, want)
	}
	assertFields(t, "params", s.Params, []Field{{Name: "id", SQLType: "bigint", GoType: "int64"}})
}

func TestParseScript(t *testing.T) {
	s := mustParseFile(t, "testdata/good/reset.sql")
	if !s.Multi || s.Kind != ":exec" {
		t.Errorf("multi %v, kind %s", s.Multi, s.Kind)
	}
	// One statement with a ";" in a literal or a comment is no script.
	if s, err := Parse("one.sql", "-- name: one :exec\n-- a; b\nSELECT ';' ; \n"); err != nil || s.Multi {
		t.Errorf("multi %v, %v", s.Multi, err)
	}
}

func TestGoTypes(t *testing.T) {
	for _, tc := range []struct {
		sql, as string
		null    bool
		want    string
	}{
		{"bigint", "", false, "int64"},
		{"integer", "", true, "*int32"},
		{"text[]", "", true, "[]string"},
		{"bigint[]", "", false, "[]int64"},
		{"jsonb", "", true, "[]byte"},
		{"timestamptz", "", false, "time.Time"},
		{"timestamp with time zone", "", false, "time.Time"},
		{"interval", "", true, "*time.Duration"},
		{"uuid", "", false, "uuid.UUID"},
		{"boolean", "", false, "bool"},
		{"double precision", "", false, "float64"},
		{"float8[]", "", false, "[]float64"},
		{"numeric", "float64", true, "*float64"},
		{"jsonb", "map[string]string", true, "map[string]string"},
	} {
		got, err := goType(tc.sql, tc.as, tc.null)
		if err != nil || got != tc.want {
			t.Errorf("goType(%q, %q, %v) = %q, %v; want %q", tc.sql, tc.as, tc.null, got, err, tc.want)
		}
	}
}

func TestGoName(t *testing.T) {
	for snake, want := range map[string][2]string{
		"lookup_ids": {"LookupIDs", "lookupIDs"},
		"id":         {"ID", "id"},
		"dedup_key":  {"DedupKey", "dedupKey"},
		"up_to_id":   {"UpToID", "upToID"},
	} {
		if got := [2]string{goName(snake, true), goName(snake, false)}; got != want {
			t.Errorf("goName(%q) = %q, want %q", snake, got, want)
		}
	}
}

// TestParseErrors: a bad header or parameter is reported with its file
// and line.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"no_header", "-- Just prose.\nSELECT 1\n", "no_header.sql:1: no \"-- name:"},
		{"bad_kind", "-- Prose.\n-- name: bad_kind :some\nSELECT 1\n", "bad_kind.sql:2: want \"-- name: <name> :one|:many|:exec|:execrows\""},
		{"other_file", "-- name: other :exec\nSELECT 1\n", "other_file.sql:1: statement \"other\" is in file other_file.sql"},
		{"no_returns", "-- name: no_returns :one\nSELECT 1\n", "no_returns.sql:1: :one needs a \"-- returns:\" line"},
		{"exec_returns", "-- name: exec_returns :exec\n-- returns: n int\nSELECT 1\n", "exec_returns.sql:2: :exec returns no rows"},
		{"no_type", "-- name: no_type :one\n-- returns: n\nSELECT 1\n", "no_type.sql:2: column n has no SQL type"},
		{"unknown_type", "-- name: unknown_type :one\n-- returns: n numeric\nSELECT 1\n", "unknown_type.sql:2: column n: no Go type for SQL type \"numeric\""},
		{"bad_package", "-- name: bad_package :one\n-- returns: n text as big.Int\nSELECT 1\n", "bad_package.sql:2: column n: the Go type \"big.Int\" uses package \"big\""},
		{"bad_mode", "-- name: bad_mode :exec\n-- mode: fast\nSELECT 1\n", "bad_mode.sql:2: unknown mode \"fast\""},
		{"capacity_exec", "-- name: capacity_exec :exec\n-- capacity: n\nSELECT @n::int\n", "capacity_exec.sql:2: only a :many statement returns a slice to size"},
		{"capacity_unknown", "-- name: capacity_unknown :many\n-- capacity: m\n-- returns: n int\nSELECT @n::int\n", "capacity_unknown.sql:2: capacity m is not a parameter"},
		{"capacity_text", "-- name: capacity_text :many\n-- capacity: n\n-- returns: n text\nSELECT @n::text\n", "capacity_text.sql:2: capacity n is a string, not an integer"},
		{"two_names", "-- name: two_names :exec\n-- name: two_names :exec\nSELECT 1\n", "two_names.sql:2: a second \"-- name:\" line"},
		{"undeclared", "-- name: undeclared :exec\nDELETE FROM t\nWHERE a = $1\n", "undeclared.sql:1: 1 $n parameters but 0 declared"},
		{"untyped", "-- name: untyped :exec\n-- params: a\nDELETE FROM t\nWHERE a = $1\n", "untyped.sql:4: parameter $1 has no type"},
		{"untyped_named", "-- name: untyped_named :exec\nDELETE FROM t\nWHERE a = @a\n", "untyped_named.sql:3: parameter @a has no type"},
		{"gap", "-- name: gap :exec\n-- params: a int, b int\nSELECT $2\n", "gap.sql:1: parameter $1 is never used"},
		{"mixed", "-- name: mixed :exec\nSELECT $1::int,\n  @b::int\n", "mixed.sql:3: mixes $n and @name parameters"},
		{"two_casts", "-- name: two_casts :exec\nSELECT @a::int,\n  @a::text\n", "two_casts.sql:3: parameter @a is cast to text here and to int before"},
		{"declared_cast", "-- name: declared_cast :exec\n-- params: a text\nSELECT $1::int\n", "declared_cast.sql:2: parameter $1 is declared text but cast to int"},
		{"stray_param", "-- name: stray_param :exec\n-- params: b int\nSELECT @a::int\n", "stray_param.sql:2: \"-- params:\" declares b"},
		{"taken_name", "-- name: taken_name :exec\n-- params: err int\nSELECT $1\n", "taken_name.sql:2: parameter $1: the name err is taken"},
		{"keyword", "-- name: keyword :exec\n-- params: type text\nSELECT $1\n", "keyword.sql:2: parameter $1: the name type is taken"},
		{"not_snake", "-- name: not_snake :one\n-- returns: a_id int, a_ID int\nSELECT 1, 2\n", "not_snake.sql:2: \"a_ID\" is not a snake_case name"},
		{"dup_column", "-- name: dup_column :one\n-- returns: a int, a text\nSELECT 1, 2\n", "dup_column.sql:2: two columns are called A"},
		{"script_params", "-- name: script_params :exec\n-- params: a int\nSELECT 1;\nSELECT $1\n", "script_params.sql:4: a text of several statements cannot take parameters"},
		{"script_rows", "-- name: script_rows :many\n-- returns: a int\nSELECT 1;\nSELECT 2\n", "script_rows.sql:1: a text of several statements can only be :exec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.name+".sql", tc.src)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v\nwant one starting %q", err, tc.want)
			}
		})
	}
}

func mustParseFile(t *testing.T, path string) Statement {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(filepath.Base(path), string(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func assertFields(t *testing.T, what string, got, want []Field) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d, want %d: %+v", what, len(got), len(want), got)
	}
	for i := range want {
		got[i].line = 0
		if got[i] != want[i] {
			t.Errorf("%s[%d] = %+v, want %+v", what, i, got[i], want[i])
		}
	}
}
