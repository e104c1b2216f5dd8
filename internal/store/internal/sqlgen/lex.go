package sqlgen

import (
	"strings"
)

// ref is a parameter reference found in a statement: $3 or @name, with the
// type of a cast written right after it ("" when there is none).
type ref struct {
	start, end int    // byte offsets of "$3" or "@name" in the text
	name       string // "3" or "name"
	named      bool
	cast       string // normalized: lower case, single spaces, "[]" kept
	line       int    // 1-based, in the file
}

// scan finds the parameter references of text and whether it holds more than
// one statement (a ";" followed by more SQL). It skips what PostgreSQL does
// not read as SQL: comments, string literals (standard, E'...' with
// backslash escapes, dollar-quoted) and quoted identifiers, so that "$1" or
// "@name" in a comment stays prose. firstLine is the file line text starts on.
func scan(text string, firstLine int) (refs []ref, multi bool) {
	line := firstLine
	seenEnd := false // a top-level ";" was passed
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == '-' && strings.HasPrefix(text[i:], "--"):
			i = skipTo(text, i, "\n", false)
		case c == '/' && strings.HasPrefix(text[i:], "/*"):
			j := skipBlockComment(text, i)
			line += strings.Count(text[i:j], "\n")
			i = j
		case c == '\'':
			backslash := i > 0 && (text[i-1] == 'E' || text[i-1] == 'e') && (i < 2 || !isIdent(text[i-2]))
			j := skipQuoted(text, i, '\'', backslash)
			line += strings.Count(text[i:j], "\n")
			i = j
		case c == '"':
			j := skipQuoted(text, i, '"', false)
			line += strings.Count(text[i:j], "\n")
			i = j
		case c == '$' && i+1 < len(text) && isDigit(text[i+1]) && (i == 0 || !isIdent(text[i-1])):
			j := i + 1
			for j < len(text) && isDigit(text[j]) {
				j++
			}
			refs = append(refs, withCast(text, ref{start: i, end: j, name: text[i+1 : j], line: line}))
			i = j
		case c == '$' && (i == 0 || !isIdent(text[i-1])):
			if tag, ok := dollarTag(text[i:]); ok {
				j := skipTo(text, i+len(tag), tag, true)
				line += strings.Count(text[i:j], "\n")
				i = j
				break
			}
			i++
		case c == '@' && i+1 < len(text) && isIdentStart(text[i+1]) && (i == 0 || !joinsAt(text[i-1])):
			j := i + 1
			for j < len(text) && isIdent(text[j]) {
				j++
			}
			refs = append(refs, withCast(text, ref{start: i, end: j, name: text[i+1 : j], named: true, line: line}))
			i = j
		case c == ';':
			seenEnd = true
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		default:
			multi = multi || seenEnd
			i++
		}
	}
	return refs, multi
}

// withCast fills in t.cast from a "::type" written right after the
// parameter: a type name of one or more words ("double precision") with any
// "[]" suffixes.
func withCast(text string, t ref) ref {
	if !strings.HasPrefix(text[t.end:], "::") {
		return t
	}
	i := t.end + 2
	words := []string{}
	for {
		j := i
		for j < len(text) && text[j] == ' ' {
			j++
		}
		k := j
		for k < len(text) && isIdent(text[k]) {
			k++
		}
		word := strings.ToLower(text[j:k])
		if word == "" || (len(words) > 0 && !multiWordPrefix(strings.Join(append(words, word), " "))) {
			break
		}
		words, i = append(words, word), k
	}
	if len(words) == 0 {
		return t // a cast to a quoted type name: leave it to a declaration
	}
	for strings.HasPrefix(text[i:], "[]") {
		words[len(words)-1] += "[]"
		i += 2
	}
	t.cast = strings.Join(words, " ")
	return t
}

// multiWordPrefix reports whether phrase begins a type name of several words.
func multiWordPrefix(phrase string) bool {
	for _, name := range multiWordTypes {
		if strings.HasPrefix(name, phrase) {
			return true
		}
	}
	return false
}

// skipTo returns the offset after the next end at or after i+1 (or
// len(text)); with inclusive false it stops before end.
func skipTo(text string, i int, end string, inclusive bool) int {
	j := strings.Index(text[i+1:], end)
	if j < 0 {
		return len(text)
	}
	if inclusive {
		return i + 1 + j + len(end)
	}
	return i + 1 + j
}

// skipBlockComment returns the offset after the /* comment */ at i, which
// PostgreSQL lets nest.
func skipBlockComment(text string, i int) int {
	depth := 0
	for i < len(text) {
		switch {
		case strings.HasPrefix(text[i:], "/*"):
			depth++
			i += 2
		case strings.HasPrefix(text[i:], "*/"):
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return i
}

// skipQuoted returns the offset after the literal or identifier opened by
// quote at i; a doubled quote is part of it, and so is a character after a
// backslash in an E'...' string.
func skipQuoted(text string, i int, quote byte, backslash bool) int {
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '\\':
			if backslash {
				j++
			}
		case quote:
			if j+1 < len(text) && text[j+1] == quote {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(text)
}

// dollarTag returns the opening $tag$ (or $$) of a dollar-quoted string at
// the start of s.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		switch {
		case s[j] == '$':
			return s[:j+1], true
		case !isIdent(s[j]) || (j == 1 && isDigit(s[j])):
			return "", false
		}
	}
	return "", false
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isIdent(c byte) bool      { return isIdentStart(c) || isDigit(c) }

// joinsAt reports whether c, right before an "@", makes the "@" part of a
// word or of an operator that ends in "@" (<@, @@) rather than a parameter.
func joinsAt(c byte) bool { return isIdent(c) || c == '@' || c == '<' }
