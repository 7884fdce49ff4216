package seeds

import (
	"encoding/json"
	"strings"
	"testing"

	"mmlab/experiment"
	"mmlab/experiment/forkstall"
	"mmlab/experiment/redzone"
	"mmlab/machine"
	"mmlab/report"
)

// Seed 000's section gains the red-zone table, one row per result, and a
// verdict line from the live nop5 results: clobbered or left alone.
func TestSection000RedZone(t *testing.T) {
	seed := All()[0]
	for _, c := range []struct {
		bad  uint64
		want string
	}{
		{99, "seed 000: this kernel's nop5 optimization clobbers a probed function's red zone: 99 of 100 calls found -8,-16,-24,-32(%rsp) changed"},
		{0, "seed 000: this kernel leaves a probed function's red zone alone"},
	} {
		doc := report.NewDocument[*redzone.Options, redzone.Result]("redzone", machine.MustNamed("x86-64"), &redzone.Options{Calls: 20, Samples: 4})
		mask := uint64(0)
		if c.bad > 0 {
			mask = 0xf
		}
		doc.Results = []redzone.Result{
			{Row: experiment.Row{Target: experiment.Model, Variant: "call"}, Attach: redzone.AttachModel, Site: redzone.SiteNop5, Calls: 100, Corrupted: 99, Mask: 0xf},
			{Row: experiment.LiveRow, Attach: "perf", Site: redzone.SiteNop5, Calls: 100, Corrupted: c.bad, Mask: mask},
		}
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		sec := seed.Section(Docs{"redzone": b})
		parts := strings.SplitN(sec.Verdict, "; ", 2)
		if len(parts) != 2 || !strings.HasPrefix(parts[1], strings.TrimPrefix(c.want, "seed 000: ")) {
			t.Errorf("verdict %q, want it to end with %q", sec.Verdict, c.want)
		}
		i := len(sec.Parts) - 1
		if i < 0 || sec.Parts[i].Experiment != "redzone" || len(sec.Parts[i].Tables[0].Rows) != 2 || sec.Parts[i].Tables[0].Rows[0][8] != "0xf" {
			t.Errorf("parts %+v", sec.Parts)
		}
	}
}

// simVerdict000 judges seed 000's table on its machine: the published rows
// themselves reproduce it; a sim whose after design still stalls forks does
// not.
func TestSimVerdict000(t *testing.T) {
	var s000 *Seed
	for _, s := range All() {
		if s.ID == "000" {
			s000 = s
		}
	}
	sweep := func(afterFork float64) []forkstall.Result {
		var rs []forkstall.Result
		for _, p := range s000.Published.Forkstall {
			for _, v := range []struct {
				name         string
				fork, attach float64
			}{{"before", p.ForkBeforeMs, p.AttachBeforeMs}, {"after", p.ForkAfterMs, p.AttachAfterMs}} {
				if v.name == "after" && forkstall.Busy(p.Case) && afterFork > 0 {
					v.fork = afterFork
				}
				rs = append(rs, forkstall.Result{Row: experiment.Row{Target: experiment.Sim, Variant: v.name}, Case: p.Case, Mode: p.Mode,
					ForkMaxMs: v.fork, AttachMs: v.attach})
			}
		}
		return rs
	}
	got := simVerdict000("sim", simForkRows(s000.Published.Forkstall, sweep(0)))
	if want := "sim reproduces the seed: fork before within 2x in 6 of 6 rows, fork after <= 1 ms in 6 of 6 rows, attach after/before as the seed's in 6 of 6 rows, idle fork after within 2x in 2 of 2 rows, idle fork after/before 0.8-1.1 in 2 of 2 rows"; got != want {
		t.Errorf("published rows: %q, want %q", got, want)
	}
	if got := simVerdict000("sim", simForkRows(s000.Published.Forkstall, sweep(150))); !strings.HasPrefix(got, "sim does not reproduce the seed") || !strings.Contains(got, "fork after <= 1 ms in 0 of 6 rows") {
		t.Errorf("stalling after: %q", got)
	}
}
