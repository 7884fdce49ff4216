package seeds

import (
	"fmt"

	"mmlab/experiment"
	"mmlab/experiment/mapslock"
	"mmlab/report"
)

func seed003() *Seed {
	return &Seed{
		ID: "003",
		Steps: []Step{
			{Experiment: "mapslock", Quick: []string{"--runs", "5", "--size", "512M"}, Full: []string{"--runs", "30", "--size", "4G"},
				EstQuick: 10 * 1e9, EstFull: 60 * 1e9},
		},
		section: section003,
	}
}

func section003(s *Seed, docs Docs) report.Seed {
	sec := report.Seed{ID: s.ID, Title: s.Published.Title, Summary: s.Published.Summary, Source: s.Published.Source}
	var lock report.Document[mapslock.Result]
	verdict := "seed 003: no live result of the mapslock probe"
	if decode(docs, "mapslock", &lock) {
		part := report.Part{Experiment: "mapslock", Title: "Does PROCMAP_QUERY wait for mmap_lock?"}
		t := report.Table{
			Title:   fmt.Sprintf("PROCMAP_QUERY during mprotect(%s) of a populated region (median of %v runs)", experiment.Bytes(uint64(toFloat(lock.Params["size_bytes"]))), lock.Params["runs"]),
			Columns: []string{"target", "variant", "case", "hold ms", "query ms", "returned during the hold"},
		}
		for _, r := range lock.Results {
			t.Rows = append(t.Rows, []string{string(r.Target), r.Variant, r.Case, ms(r.HoldMs, true), ms(r.QueryMs, true),
				fmt.Sprintf("%.0f%% of %d", 100*r.First, r.Probed)})
		}
		part.Tables = append(part.Tables, t)
		sec.Parts = append(sec.Parts, part)
		if l := mapslock.Line(lock.Results, experiment.Live, experiment.VariantKernel); l != "" {
			verdict = "seed 003: " + l
		} else {
			for _, sk := range lock.Skipped {
				verdict = "seed 003: the live probe did not run: " + sk
			}
		}
	}
	sec.Verdict = verdict
	return sec
}

func toFloat(v any) float64 {
	f, _ := v.(float64)
	return f
}
