package seeds

import "mmlab/report"

func seed004() *Seed {
	return &Seed{ID: "004", section: func(s *Seed, docs Docs) report.Seed {
		return report.Seed{ID: s.ID, Title: s.Published.Title, Summary: s.Published.Summary, Verdict: "seed 004: not run yet"}
	}}
}
