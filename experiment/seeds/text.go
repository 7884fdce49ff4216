package seeds

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"mmlab/experiment"
	"mmlab/report"
)

// WriteText prints a seed's section as the terminal shows it: the header,
// the summary, each part's tables, its notes, and the verdict.
func WriteText(w io.Writer, s *Seed, sec report.Seed) {
	fmt.Fprintf(w, "\n== %s\n   %s\n", s.Header(), sec.Summary)
	for _, p := range sec.Parts {
		for _, t := range p.Tables {
			fmt.Fprintln(w)
			WriteTable(w, t)
		}
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	fmt.Fprintf(w, "\n%s\n", sec.Verdict)
}

// WriteTable prints t with aligned columns: text left, numbers right.
func WriteTable(w io.Writer, t report.Table) {
	if t.Title != "" {
		fmt.Fprintln(w, t.Title)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.Columns, "\t")+"\t")
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	tw.Flush()
}

// ms prints a millisecond figure (experiment.Ms), "-" for a missing one.
func ms(x float64, ok bool) string {
	if !ok {
		return "-"
	}
	return experiment.Ms(x)
}
