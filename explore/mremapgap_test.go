package explore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"mmlab/machine"
)

// The mremap gap's scenarios fail in the after design exactly in the
// layouts the table marks (text: far and adjacent; query: those
// and split), and never in the before design nor with the gathering fix;
// the query-only fix passes every query scenario and fails the text ones
// the after design fails.
func TestGapLayouts(t *testing.T) {
	for _, l := range GapLayouts {
		for _, query := range []bool{false, true} {
			sc := gapScenario(l, query)
			if Lookup(sc.Name) == nil {
				t.Fatalf("%s is not among the Scenarios", sc.Name)
			}
			want := l.TextGap
			if query {
				want = l.QueryGap
			}
			rep := mustExplore(t, Lookup(sc.Name), Options{Machine: x86, Design: After, Schedules: 1000, Seed: 1})
			if f := rep.Failure; (f != nil) != want {
				t.Errorf("%s (after): %d schedules, failure %v; the table says a gap: %v", sc.Name, rep.Schedules, f, want)
			} else if f != nil && f.Violation.Property != sc.Props[0] {
				t.Errorf("%s (after): %v, want %s", sc.Name, f.Violation, sc.Props[0])
			}
			for _, d := range []Design{Before, Fix, QueryFix} {
				rep := mustExplore(t, Lookup(sc.Name), Options{Machine: x86, Design: d, Schedules: 1000, Seed: 1})
				wantFail := d == QueryFix && !query && l.TextGap
				if f := rep.Failure; (f != nil) != wantFail {
					t.Errorf("%s (%s): %d schedules, failure %v, want one: %v", sc.Name, d, rep.Schedules, f, wantFail)
					if f != nil {
						var b bytes.Buffer
						WriteInterleaving(&b, Steps(f.Outcome.Record, f.Outcome.Final), f.Violation)
						t.Log(b.String())
					}
				} else if f != nil && f.Violation.Property != sc.Props[0] {
					t.Errorf("%s (%s): %v, want %s", sc.Name, d, f.Violation, sc.Props[0])
				}
			}
		}
	}
}

// The pinned findings of testdata/*.replay fail their property again in
// their design, and pass in every other design of their scenario but the
// query-only fix of the mremap gap, which fails a text finding again.
func TestPinnedReplays(t *testing.T) {
	files, err := filepath.Glob("testdata/*.replay")
	if err != nil || len(files) == 0 {
		t.Fatalf("no replay files: %v", err)
	}
	for _, name := range files {
		fh, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ReadReplay(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m, err := machine.Lookup(p.Machine)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out := Replay(Lookup(p.Scenario), m, p.Design, p.Deviations)
		if out.Violation == nil || out.Violation.Property != p.Property {
			t.Errorf("%s: %s (%s) replays to %v, want %q", name, p.Scenario, p.Design, out.Violation, p.Property)
		}
		for _, d := range Lookup(p.Scenario).Designs() {
			if d == p.Design {
				continue
			}
			out := Replay(Lookup(p.Scenario), m, d, p.Deviations)
			if d == QueryFix && p.Property == PropTextMiss {
				if out.Violation == nil || out.Violation.Property != p.Property {
					t.Errorf("%s: in the %s design %v, want %q", name, d, out.Violation, p.Property)
				}
			} else if out.Violation != nil {
				t.Errorf("%s: in the %s design too: %v", name, d, out.Violation)
			}
		}
	}
}

// The shrunk text finding names the functions of the race: the modifier
// stopped in mremap_to between do_munmap and move_vma, holding mmap_lock
// for write, and the reader's walk resumed at the destination and took the
// VMA above it from lock_next_vma.
func TestGapInterleavingNamesTheRace(t *testing.T) {
	fh, err := os.Open("testdata/mremap-text-far-after.replay")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ReadReplay(fh)
	fh.Close()
	if err != nil {
		t.Fatal(err)
	}
	out := Replay(Lookup(p.Scenario), x86, p.Design, p.Deviations)
	var b bytes.Buffer
	WriteInterleaving(&b, Steps(out.Record, out.Final), out.Violation)
	for _, want := range []string{"T1(modifier)     start -> mremap_to(do_munmap(new_addr) done, move_vma next)  [preempted]  holding mmap_lock(w)",
		"T2(reader)       start -> exit  [fails here]", "the walk resumed at 0x10001000", "lock_next_vma gave 0x10002000-0x10003000"} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("the interleaving lacks %q:\n%s", want, b.String())
		}
	}
}
