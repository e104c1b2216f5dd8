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

// refArray is an array parameter of elements T, each passed as an R, a
// reference to it with the Valuer method pgx encodes T's SQL type with.
type refArray[T any, R ~struct{ p *T }] []T

func (a refArray[T, R]) Dimensions() []pgtype.ArrayDimension { return arrayDims(len(a), a == nil) }
func (a refArray[T, R]) Index(i int) any                     { return R{&a[i]} }
func (a refArray[T, R]) IndexType() any                      { return R{} }

// The array parameters by element type, and their elements' references.
type (
	int8Array     = refArray[int64, int8Ref]       // bigint[]
	int4Array     = refArray[int32, int4Ref]       // integer[]
	float8Array   = refArray[float64, float8Ref]   // float8[]
	textArray     = refArray[string, textRef]      // text[]
	nullTextArray = refArray[*string, nullTextRef] // text[], nil elements NULL
	uuidArray     = refArray[[16]byte, uuidRef]    // uuid[]

	int8Ref     struct{ p *int64 }
	int4Ref     struct{ p *int32 }
	float8Ref   struct{ p *float64 }
	textRef     struct{ p *string }
	nullTextRef struct{ p **string }
	uuidRef     struct{ p *[16]byte }
)

func (r int8Ref) Int64Value() (pgtype.Int8, error) { return pgtype.Int8{Int64: *r.p, Valid: true}, nil }

func (r int4Ref) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*r.p), Valid: true}, nil
}

func (r float8Ref) Float64Value() (pgtype.Float8, error) {
	return pgtype.Float8{Float64: *r.p, Valid: true}, nil
}

func (r textRef) TextValue() (pgtype.Text, error) { return pgtype.Text{String: *r.p, Valid: true}, nil }

func (r nullTextRef) TextValue() (pgtype.Text, error) {
	if *r.p == nil {
		return pgtype.Text{}, nil
	}
	return pgtype.Text{String: **r.p, Valid: true}, nil
}

func (r uuidRef) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID{Bytes: *r.p, Valid: true}, nil }

// bytesArray is a jsonb[] or bytea[] parameter whose nil elements are
// NULLs. Its elements are the slices themselves: pgx takes a []byte as
// it is (boxing a nil one allocates nothing), where it reaches the
// elements of a plain [][]byte through reflection, an allocation each.
type bytesArray [][]byte

func (a bytesArray) Dimensions() []pgtype.ArrayDimension { return arrayDims(len(a), a == nil) }
func (a bytesArray) Index(i int) any                     { return a[i] }
func (a bytesArray) IndexType() any                      { return []byte(nil) }
