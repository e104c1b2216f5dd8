package sqlgen

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// CheckDatabase prepares every statement file of dir on conn, with
// {schema} replaced by the quoted schema (which must be migrated), and
// reports each one the server rejects and each parameter or result column
// whose declared type is not the type the server gives it, and counts
// that differ: a wrong declaration fails a test instead of a scan at run
// time. Nullability is not checked: the server does not describe it.
// A text of several statements cannot be prepared and is skipped; it
// takes no parameters and returns no rows.
func CheckDatabase(ctx context.Context, conn *pgx.Conn, dir, schema string) error {
	stmts, err := ParseDir(dir)
	if err != nil {
		return err
	}
	c := dbCheck{ctx: ctx, conn: conn, oids: map[string]uint32{}}
	ident := pgx.Identifier{schema}.Sanitize()
	var errs []error
	for _, s := range stmts {
		if s.Multi {
			continue
		}
		text := strings.ReplaceAll(s.Text, "{schema}", ident)
		// The unnamed statement: nothing is left behind on the connection.
		desc, err := conn.PgConn().Prepare(ctx, "", text, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: prepare: %w", s.File, err))
			continue
		}
		errs = append(errs, c.compare(s, "parameter", s.Params, desc.ParamOIDs)...)
		if s.Kind == ":one" || s.Kind == ":many" {
			errs = append(errs, c.compare(s, "column", s.Columns, fieldOIDs(desc.Fields))...)
		}
	}
	return errors.Join(errs...)
}

type dbCheck struct {
	ctx  context.Context
	conn *pgx.Conn
	oids map[string]uint32 // of the declared type names
}

// compare checks the declared fields against the OIDs the server described.
func (c *dbCheck) compare(s Statement, what string, fields []Field, got []uint32) []error {
	if len(fields) != len(got) {
		return []error{fmt.Errorf("%s: %d %ss declared, the server has %d", s.File, len(fields), what, len(got))}
	}
	var errs []error
	for i, f := range fields {
		want, err := c.oid(f.SQLType)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s %d (%s): %w", s.File, what, i+1, f.Name, err))
			continue
		}
		if want != got[i] {
			errs = append(errs, fmt.Errorf("%s: %s %d (%s) is declared %s, the server says %s",
				s.File, what, i+1, f.Name, f.SQLType, c.typeName(got[i])))
		}
	}
	return errs
}

// oid resolves a declared type name the way the server reads it, aliases
// (int, timestamptz) included.
func (c *dbCheck) oid(name string) (uint32, error) {
	if oid, ok := c.oids[name]; ok {
		return oid, nil
	}
	var oid *uint32
	if err := c.conn.QueryRow(c.ctx, "SELECT to_regtype($1)::oid", name).Scan(&oid); err != nil {
		return 0, fmt.Errorf("resolve type %s: %w", name, err)
	}
	if oid == nil {
		return 0, fmt.Errorf("the server knows no type %s", name)
	}
	c.oids[name] = *oid
	return *oid, nil
}

// typeName names a type for an error message; the OID is the fallback.
func (c *dbCheck) typeName(oid uint32) string {
	var name string
	if err := c.conn.QueryRow(c.ctx, "SELECT format_type($1, NULL)", oid).Scan(&name); err != nil {
		return fmt.Sprintf("type oid %d", oid)
	}
	return name
}

func fieldOIDs(fields []pgconn.FieldDescription) []uint32 {
	oids := make([]uint32, len(fields))
	for i, f := range fields {
		oids[i] = f.DataTypeOID
	}
	return oids
}
