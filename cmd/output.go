package cmd

import (
	"slices"

	"github.com/spf13/cobra"
)

// Output formats of the commands that print data (-o, --output).
const (
	outputTable = "table" // columns for a person; the default
	outputWide  = "wide"  // the table with more columns
	outputJSON  = "json"  // for scripts: the API's JSON
)

var outputFormats = []string{outputTable, outputJSON, outputWide}

// output is the -o flag of a command that prints data, with --json kept
// as its alias (the flag of earlier releases).
type output struct {
	format string
	asJSON bool
}

// addOutputFlags declares -o and --json on c; jsonShape says what the JSON
// is, for the help.
func addOutputFlags(c *cobra.Command, o *output, jsonShape string) {
	c.Flags().StringVarP(&o.format, "output", "o", outputTable, "`format`: table, wide (more columns) or json ("+jsonShape+")")
	c.Flags().BoolVar(&o.asJSON, "json", false, "the same as -o json")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
}

// resolve checks the flags and returns the format: --json is -o json, and
// contradicting -o is refused.
func (o *output) resolve(c *cobra.Command) (string, error) {
	if !slices.Contains(outputFormats, o.format) {
		return "", badInputf("-o %q: want table, wide or json", o.format)
	}
	if o.asJSON {
		if c.Flags().Changed("output") && o.format != outputJSON {
			return "", badInputf("--json and -o %s contradict each other: give one", o.format)
		}
		return outputJSON, nil
	}
	return o.format, nil
}

// json reports whether the command prints JSON (after checkOutput).
func (o *output) json() bool { return o.format == outputJSON }

// wide reports whether the table has its extra columns.
func (o *output) wide() bool { return o.format == outputWide }

// checkOutput is a PreRunE checking o's flags (chained before pre, if
// any).
func checkOutput(o *output, pre func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		f, err := o.resolve(c)
		if err != nil {
			return err
		}
		o.format = f
		if pre != nil {
			return pre(c, args)
		}
		return nil
	}
}
