package sqlgen

import (
	"go/token"
	"go/types"
	"strings"
)

// initialisms are the words Go spells in capitals (Go's naming convention).
var initialisms = map[string]string{
	"id": "ID", "ids": "IDs", "url": "URL", "uuid": "UUID", "json": "JSON",
	"sql": "SQL", "http": "HTTP", "api": "API", "ip": "IP",
}

// goName turns a snake_case name into a Go one: exported (DedupKey, LookupIDs)
// or not (dedupKey, ids).
func goName(snake string, exported bool) string {
	var b strings.Builder
	for i, part := range strings.Split(snake, "_") {
		switch {
		case part == "":
		case i == 0 && !exported:
			b.WriteString(part)
		case initialisms[part] != "":
			b.WriteString(initialisms[part])
		default:
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// reserved are the names the generated methods use for their receiver,
// arguments and locals, which a $n parameter's argument must not shadow.
var reserved = map[string]bool{
	"ctx": true, "db": true, "q": true, "arg": true, "rows": true, "row": true, "r": true, "err": true, "tag": true,
}

// takenName reports whether an argument called name would break the
// generated method: a keyword, a local or a predeclared identifier it uses.
func takenName(name string) bool {
	return reserved[name] || types.Universe.Lookup(name) != nil || token.IsKeyword(name)
}
