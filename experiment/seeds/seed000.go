package seeds

import "mmlab/report"

func seed000() *Seed {
	return &Seed{ID: "000", section: func(s *Seed, docs Docs) report.Seed {
		return report.Seed{ID: s.ID, Title: s.Published.Title, Summary: s.Published.Summary, Verdict: "seed 000: not run yet"}
	}}
}
