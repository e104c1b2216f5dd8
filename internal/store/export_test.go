package store

// ArrayParam returns v as the array type the generated methods pass for a
// parameter of its Go type (see arrays.go), or v itself.
func ArrayParam(v any) any {
	switch v := v.(type) {
	case []int64:
		return int8Array(v)
	case []int32:
		return int4Array(v)
	case []float64:
		return float8Array(v)
	case []string:
		return textArray(v)
	case []*string:
		return nullTextArray(v)
	case [][16]byte:
		return uuidArray(v)
	case [][]byte:
		return bytesArray(v)
	}
	return v
}
