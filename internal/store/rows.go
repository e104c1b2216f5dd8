package store

import "github.com/jackc/pgx/v5"

// collectRows appends rows' rows to out and closes rows. Every row is
// scanned into r through dests (pointers into r), both made once by the
// generated method for all rows: a Scan into a fresh row and a fresh
// list of destinations allocated both for each row. r is cleared before
// each Scan, so that nothing of the previous row's is reused.
func collectRows[T any](rows pgx.Rows, out []T, r *T, dests ...any) ([]T, error) {
	defer rows.Close()
	var zero T
	for rows.Next() {
		*r = zero
		if err := rows.Scan(dests...); err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
