package sqlgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// itemsSchema is the schema testdata/good's statements run against.
const itemsSchema = `
CREATE SCHEMA {schema};
CREATE TABLE {schema}.items (
    id bigint PRIMARY KEY, owner text, name text, tags text[], seen_at timestamptz,
    meta jsonb, note text, body text, "@col" text);
CREATE TABLE {schema}.owners (id bigint PRIMARY KEY)`

func TestCheckDatabase(t *testing.T) {
	ctx, conn, schema := itemsDatabase(t)
	if err := CheckDatabase(ctx, conn, "testdata/good", schema); err != nil {
		t.Fatal(err)
	}
}

// TestCheckDatabaseReportsWrongDeclarations: a declared type the server
// disagrees with, a column too many and a statement it rejects each fail.
func TestCheckDatabaseReportsWrongDeclarations(t *testing.T) {
	ctx, conn, schema := itemsDatabase(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "item.sql"), "-- name: item :one\n-- params: id text\n-- returns: name integer\n"+
		"SELECT name FROM {schema}.items WHERE id = $1\n")
	writeFile(t, filepath.Join(dir, "names.sql"), "-- name: names :many\n-- returns: name text, extra text\n"+
		"SELECT name FROM {schema}.items\n")
	writeFile(t, filepath.Join(dir, "typo.sql"), "-- name: typo :exec\nDELETE FROM {schema}.itemz\n")
	err := CheckDatabase(ctx, conn, dir, schema)
	if err == nil {
		t.Fatal("wrong declarations passed")
	}
	for _, want := range []string{
		"item.sql: parameter 1 (id) is declared text, the server says bigint",
		"item.sql: column 1 (name) is declared integer, the server says text",
		"names.sql: 2 columns declared, the server has 1",
		"typo.sql: prepare: ERROR: relation",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// itemsDatabase connects to the test server and creates a schema of its
// own with itemsSchema's tables, dropped when the test ends.
func itemsDatabase(t *testing.T) (context.Context, *pgx.Conn, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	conn, err := pgx.Connect(ctx, testdb.URL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	schema := "sqlgen_" + hex.EncodeToString(suffix)
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, strings.ReplaceAll(itemsSchema, "{schema}", ident)); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+ident+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	return ctx, conn, schema
}
