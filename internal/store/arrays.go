package store

import "github.com/jackc/pgx/v5/pgtype"

// The generated methods pass array parameters through these types instead
// of the plain slices (see sqlgen's arrayParams). pgx encodes a plain
// slice element by element through an interface: each element of most
// types is boxed, an allocation, and some ([16]byte, []*string) go through
// a second conversion or reflection. Here each element is a reference to
// the slice's own element, a one-pointer struct, which an interface holds
// without allocating, and which pgx encodes through its Valuer interfaces
// without reflection. A terminal write of 1,000 outcomes encodes six such
// arrays. A nil slice is a NULL array, as pgx makes of a nil slice.

// arrayDims are the dimensions of a one-dimensional array of n elements,
// or nil (NULL) when isNil.
func arrayDims(n int, isNil bool) []pgtype.ArrayDimension {
	if isNil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(n), LowerBound: 1}}
}

// int8Array is a bigint[] parameter.
type int8Array []int64

type int8Ref struct{ p *int64 }

func (a int8Array) Dimensions() []pgtype.ArrayDimension { return arrayDims(len(a), a == nil) }
func (a int8Array) Index(i int) any                     { return int8Ref{&a[i]} }
func (a int8Array) IndexType() any                      { return int8Ref{} }

func (r int8Ref) Int64Value() (pgtype.Int8, error) { return pgtype.Int8{Int64: *r.p, Valid: true}, nil }

// int4Array is an integer[] parameter.
type int4Array []int32

type int4Ref struct{ p *int32 }

func (a int4Array) Dimensions() []pgtype.ArrayDimension { return arrayDims(len(a), a == nil) }
func (a int4Array) Index(i int) any                     { return int4Ref{&a[i]} }
func (a int4Array) IndexType() any                      { return int4Ref{} }

func (r int4Ref) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*r.p), Valid: true}, nil
}

// float8Array is a float8[] parameter.
type float8Array []float64

type float8Ref struct{ p *float64 }

func (a float8Array) Dimensions() []pgtype.ArrayDimension { return arrayDims(len(a), a == nil) }
func (a float8Array) Index(i int) any                     { return float8Ref{&a[i]} }
func (a float8Array) IndexType() any                      { return float8Ref{} }

func (r float8Ref) Float64Value() (pgtype.Float8, error) {
	return pgtype.Float8{Float64: *r.p, Valid: true}, nil
}

// textArray is a text[] parameter.
type textArray []string

type textRef struct{ p *string }

func (a textArray) Dimensions() []pgtype.ArrayDimension { return arrayDims(len(a), a == nil) }
func (a textArray) Index(i int) any                     { return textRef{&a[i]} }
func (a textArray) IndexType() any                      { return textRef{} }

func (r textRef) TextValue() (pgtype.Text, error) { return pgtype.Text{String: *r.p, Valid: true}, nil }

// nullTextArray is a text[] parameter whose nil elements are NULLs.
type nullTextArray []*string

type nullTextRef struct{ p **string }

func (a nullTextArray) Dimensions() []pgtype.ArrayDimension { return arrayDims(len(a), a == nil) }
func (a nullTextArray) Index(i int) any                     { return nullTextRef{&a[i]} }
func (a nullTextArray) IndexType() any                      { return nullTextRef{} }

func (r nullTextRef) TextValue() (pgtype.Text, error) {
	if *r.p == nil {
		return pgtype.Text{}, nil
	}
	return pgtype.Text{String: **r.p, Valid: true}, nil
}

// uuidArray is a uuid[] parameter.
type uuidArray [][16]byte

type uuidRef struct{ p *[16]byte }

func (a uuidArray) Dimensions() []pgtype.ArrayDimension { return arrayDims(len(a), a == nil) }
func (a uuidArray) Index(i int) any                     { return uuidRef{&a[i]} }
func (a uuidArray) IndexType() any                      { return uuidRef{} }

func (r uuidRef) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID{Bytes: *r.p, Valid: true}, nil }

// bytesArray is a jsonb[] or bytea[] parameter whose nil elements are
// NULLs. Its elements are the slices themselves: pgx takes a []byte as
// it is (boxing a nil one allocates nothing), where it reaches the
// elements of a plain [][]byte through reflection, an allocation each.
type bytesArray [][]byte

func (a bytesArray) Dimensions() []pgtype.ArrayDimension { return arrayDims(len(a), a == nil) }
func (a bytesArray) Index(i int) any                     { return a[i] }
func (a bytesArray) IndexType() any                      { return []byte(nil) }
