// Package sqlgen generates the Go bindings of a directory of SQL statement
// files, so that a statement's parameters and result columns are checked
// by the compiler where they are used instead of by convention (a file, a
// struct field and a map entry, and rows scanned by position).
//
// It is a small generator of our own rather than sqlc: the statements stay
// the files they are, commented and byte for byte what the server sees (the
// EXPLAIN tests prove their plans), and sqlc would need the schema and its
// own parser to understand them, where a header of a few lines says what
// the Go side needs and a test against the migrated schema (CheckDatabase)
// proves the header right.
//
// # Header
//
// Each file name.sql starts with comment lines; among them (sqlc's
// convention, first by habit) are the header lines:
//
//	-- name: <name> :one|:many|:exec|:execrows
//	-- mode: cache_describe
//	-- capacity: <param>
//	-- params: <decl>, <decl>, ...
//	-- returns: <decl>, <decl>, ...
//
// where decl is "<snake_name> [<sql type>] [null] [as <Go type>]".
//
//   - name is the file's base name. The text the server receives is
//     "-- name: <name>\n" followed by the file without its header lines, so
//     the statement is known by name in pg_stat_activity and logs, as it
//     was before bindings were generated.
//   - :one returns one row (an error wrapping pgx.ErrNoRows when there is
//     none), :many a slice, :exec only an error, :execrows the number of
//     rows affected.
//   - mode (optional) is the pgx.QueryExecMode it runs with, given as the
//     first argument: cache_statement, cache_describe, describe_exec, exec
//     or simple_protocol. cache_describe plans a statement with its values,
//     for statements whose filters are optional.
//   - capacity (optional, :many) names an integer parameter, the most
//     rows the statement returns (its LIMIT): the method allocates its
//     slice of rows for that many at once, where growing a slice of many
//     large rows would copy them over and over; and a <Name>Into method
//     returns them in a slice the caller passes, to reuse one.
//   - returns declares the result columns in order, for :one and :many,
//     each with its SQL type; a list may go on over several returns lines.
//     One column is returned as its value, more as a <Name>Row struct.
//   - params describes the parameters. A statement uses either $n or
//     @name parameters. With $n (short statements), params names every
//     parameter in order; they become the method's arguments. With @name
//     (long ones), the generator numbers them in the order they first
//     appear and the method takes a <Name>Params struct; params is
//     optional and refers to them by name.
//
// A parameter's SQL type is the cast written after it at any of its uses
// ($3::text[], @lease::interval) or else the one its declaration gives; a
// cast the statement needs anyway is the better place, a declaration keeps
// the text unchanged. "null" makes the Go type a pointer (slices and maps
// already have nil, which pgx sends and scans as NULL); "as" replaces the
// Go type, which pgx must be able to encode or scan ([][16]byte for a
// uuid[] takes pgx's binary codec where uuid.UUID goes through text). The
// SQL types it knows are those of goTypes; others (numeric) need an "as".
// The {schema} placeholder stays in the text: newTexts replaces it with
// the quoted schema the package validated.
//
// # Generated code
//
// One file (queries.gen.go, gofmt'ed, the same bytes for the same files)
// declares DBTX (what core took as a database handle), a Texts struct of
// every statement's text, newTexts(ident) filling it for one schema, the
// params and row types, and for each statement a method
//
//	func (q *Queries) Claim(ctx context.Context, db DBTX, arg ClaimParams) ([]ClaimRow, error)
//
// on a Queries type the package declares itself, holding a field
// "text Texts": the package, not the generator, validates and quotes the
// schema and decides what else Queries carries (statements assembled at
// run time, like the batch enqueue's). The methods return the driver's
// errors as they are: their callers know what they were doing and say so.
// Array parameters of the types in arrayParams go through the package's
// array types (int8Array, textArray, ...; internal/store's arrays.go),
// which pgx encodes without an allocation per element; a :many method
// scans every row into one row value and one list of destinations
// (collectRows, internal/store's rows.go).
//
// # Tests
//
// Check reports a generated file that its statement files no longer
// produce; CheckDatabase prepares every statement against a migrated
// schema and reports a declared type the server disagrees with.
package sqlgen
