package registry

import (
	"strings"

	"github.com/outboxd/outboxd/confschema"
)

// DecodeOptions decodes a sink's options map into out, a pointer to its
// options struct holding the defaults (declared as package confschema
// describes: `mapstructure:"name"` and `doc:"..."` tags). An option absent
// or empty keeps its default. Every problem is reported at once in an
// *OptionsError: an unknown option with the nearest known one as a
// suggestion (a typo must not be silently ignored), a duration without a
// unit (a bare 5 would mean 5 ns), a value of the wrong type. Problems
// never quote the value, since an option may hold a secret. [Define]
// decodes with it; a type defined otherwise may too.
func DecodeOptions(options map[string]any, out any) error {
	problems := confschema.Unknown(options, out)
	problems = append(problems, confschema.Decode(options, out, false)...)
	if len(problems) == 0 {
		return nil
	}
	return &OptionsError{Problems: problems}
}

// OptionsError lists every problem DecodeOptions found in a sink's options,
// each naming its option by its key below the options block.
type OptionsError struct {
	Problems []confschema.Problem
}

func (e *OptionsError) Error() string {
	texts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Unknown {
			texts[i] = strings.Replace(p.String(), "unknown key", "unknown option", 1)
		} else {
			texts[i] = "option " + p.String()
		}
	}
	return strings.Join(texts, "; ")
}
