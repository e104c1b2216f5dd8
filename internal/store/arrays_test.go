package store_test

import (
	"context"
	"testing"

	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestArrayParamsEncodeAsPgxDoes: each array type the generated methods
// pass parameters through reaches PostgreSQL as the plain slice does, as
// pgx encodes it: the same elements, NULL elements and NULL arrays.
// (Mutation: nullTextRef sending a nil element as an empty string fails
// the []*string case; textRef sending its strings as NULLs (Valid false)
// fails the []string case.)
func TestArrayParamsEncodeAsPgxDoes(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t, 1)
	ctx := context.Background()
	a, b := "a", `b "quoted", {braced}`
	for _, c := range []struct {
		sqlType string
		value   any
	}{
		{"bigint[]", []int64{1, -2, 1 << 40}},
		{"bigint[]", []int64(nil)},
		{"bigint[]", []int64{}},
		{"integer[]", []int32{0, 7, -1 << 31}},
		{"integer[]", []int32(nil)},
		{"float8[]", []float64{0, 1.5, -3e-7}},
		{"float8[]", []float64(nil)},
		{"text[]", []string{a, b, ""}},
		{"text[]", []string(nil)},
		{"text[]", []*string{&a, nil, &b}},
		{"text[]", []*string(nil)},
		{"uuid[]", [][16]byte{{1, 2, 3}, {15: 0xff}}},
		{"uuid[]", [][16]byte(nil)},
		{"jsonb[]", [][]byte{[]byte(`{"a": 1}`), nil, []byte(`[]`)}},
		{"jsonb[]", [][]byte(nil)},
		{"bytea[]", [][]byte{{0, 1, 0xff}, nil, {}}},
	} {
		var want, got *string
		q := "SELECT $1::" + c.sqlType + "::text"
		if err := pool.QueryRow(ctx, q, c.value).Scan(&want); err != nil {
			t.Fatalf("%s %#v as pgx sends it: %v", c.sqlType, c.value, err)
		}
		if err := pool.QueryRow(ctx, q, store.ArrayParam(c.value)).Scan(&got); err != nil {
			t.Fatalf("%s %#v through its array type: %v", c.sqlType, c.value, err)
		}
		if (want == nil) != (got == nil) || (want != nil && *want != *got) {
			t.Errorf("%s %#v: got %s, pgx sends %s", c.sqlType, c.value, show(got), show(want))
		}
	}
}

func show(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
