package forkstall

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"mmlab/experiment"
)

var caseTitles = map[string]string{
	CaseBusyMaps:  "the busy process maps the file",
	CaseBusyForks: "it forks and doesn't map the file",
	CaseIdle1000:  "nobody keeps mmap_lock busy, 1000 processes map the file",
	CaseIdle5000:  "nobody keeps mmap_lock busy, 5000 processes map the file",
}

var modeTitles = map[string]string{
	ModeMulti1: "uprobe_multi, 1 uprobe",
	ModeMulti4: "uprobe_multi, 4 uprobes",
	ModePerf4:  "perf_event, 4 uprobes",
}

// Table prints the seed's table: for each target, the longest fork, the
// attach and the detach time per variant (live: and the quiet fork).
func Table(w io.Writer, o *Options, rs []Result) {
	for _, target := range []experiment.Target{experiment.Model, experiment.Sim, experiment.Live} {
		var variants []string
		for _, r := range rs {
			if r.Target == target && !slices.Contains(variants, r.Variant) {
				variants = append(variants, r.Variant)
			}
		}
		if len(variants) == 0 {
			continue
		}
		where := string(target)
		if i := slices.IndexFunc(rs, func(r Result) bool { return r.Target == target && r.Machine != "" }); i >= 0 {
			where += " on " + rs[i].Machine + ", virtual time"
		}
		fmt.Fprintf(w, "\nforkstall, %s (median of %d runs; ms)\n", where, o.Runs)
		head := fmt.Sprintf("%-40s", "")
		sub := fmt.Sprintf("%-40s", "")
		for _, col := range []string{"fork() ms", "attach ms", "detach ms"} {
			head += fmt.Sprintf("%-*s", 9*len(variants)+2, col)
			for _, v := range variants {
				sub += fmt.Sprintf("%-9s", v)
			}
			sub += "  "
		}
		if target == experiment.Live {
			head += "quiet fork ms"
		}
		fmt.Fprintln(w, head)
		fmt.Fprintln(w, strings.TrimRight(sub, " "))
		lastCase := ""
		for _, r := range rs {
			if r.Target != target || r.Variant != variants[0] {
				continue
			}
			if r.Case != lastCase {
				fmt.Fprintln(w, caseTitles[r.Case])
				lastCase = r.Case
			}
			line := fmt.Sprintf("  %-38s", modeTitles[r.Mode])
			for _, metric := range []func(Result) float64{
				func(r Result) float64 { return r.ForkMaxMs },
				func(r Result) float64 { return r.AttachMs },
				func(r Result) float64 { return r.DetachMs },
			} {
				for _, v := range variants {
					cell := "-"
					if i := slices.IndexFunc(rs, func(x Result) bool {
						return x.Target == target && x.Variant == v && x.Case == r.Case && x.Mode == r.Mode
					}); i >= 0 {
						cell = experiment.Ms(metric(rs[i]))
					}
					line += fmt.Sprintf("%-9s", cell)
				}
				line += "  "
			}
			if target == experiment.Live {
				line += experiment.Ms(r.BaselineMs)
			}
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
	}
}
