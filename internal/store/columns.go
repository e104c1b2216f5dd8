package store

// EmptyHeaders is the headers column's default: no headers, no trace
// context.
const EmptyHeaders = "{}"
