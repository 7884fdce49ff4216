package replay

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"

	"mmlab/machine"
	"mmlab/mm"
	"mmlab/trace"
)

var familySeeds = flag.Int("family.seeds", 80, "generated traces per harder family the differential test replays on both targets")

// span is a VMA's range.
type span struct{ lo, hi uint64 }

// overlapping counts the spans that overlap [lo, hi).
func overlapping(vs []span, lo, hi uint64) int {
	n := 0
	for _, v := range vs {
		if v.lo < hi && v.hi > lo {
			n++
		}
	}
	return n
}

// familyCoverage replays seeds 1..n of a family on the model of a machine
// with features f and counts what its traces reached, by what each op met in
// the address space it ran on.
func familyCoverage(t *testing.T, family string, n int, f machine.Features) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for s := int64(1); s <= int64(n); s++ {
		p := trace.Generate(s, trace.GenOptions{Family: family})
		depth, deepest := 0, 0
		for _, o := range p.Ops {
			switch o.Kind {
			case trace.OpFork:
				depth++
				deepest = max(deepest, depth)
			case trace.OpExit:
				depth--
			}
		}
		seen[fmt.Sprintf("depth %d", min(deepest, 3))]++
		if len(p.Ops) >= 300 {
			seen["300 ops"]++
		}
		before := map[*mm.MM][]span{} // each address space after its last op
		failed := map[int]string{}    // line -> error name, filled after the run
		type step struct {
			op     trace.Op
			before []span
			known  bool
		}
		var steps []step
		after := func(m *mm.MM, op *trace.Op) {
			prev, known := before[m]
			steps = append(steps, step{*op, prev, known})
			var now []span
			for _, v := range m.VMAs() {
				now = append(now, span{v.Start, v.End})
				if v.End-v.Start >= 512<<20 {
					seen["VMA of 512 MiB or more"]++
				}
				if v.End == m.TaskSize() {
					seen["VMA ending at TASK_SIZE"]++
				}
				if v.File != nil && v.Pgoff<<12 >= 1<<63-1<<32 {
					seen["file VMA at an offset within 4 GiB of 2^63"]++
				}
			}
			before[m] = now
		}
		var out bytes.Buffer
		err := runHooked(context.Background(), f, mm.Config{GapFix: mm.GapFixNone}, p, &out, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(out.String(), "\n") {
			var line int
			if _, err := fmt.Sscanf(l, "error %d ", &line); err == nil {
				failed[line] = strings.SplitN(l, " ", 3)[2]
			}
		}
		for _, st := range steps {
			o, e := st.op, failed[st.op.Line]
			if e != "" {
				seen[o.Kind.String()+" "+e]++
			}
			switch {
			case o.Kind == trace.OpExec && e == "":
				seen["exec ran a ret"]++
			case o.Kind == trace.OpMprotect && o.Prot == trace.ProtExec && e == "":
				seen["mprotect to --x"]++
			}
			if o.Kind != trace.OpMremap || !st.known {
				continue
			}
			if e == "EPERM" && o.MayMove && overlapping(st.before, o.NewAddr, o.NewAddr+o.NewLen) > 0 {
				seen["mremap onto a mapping EPERM"]++ // refused after the destination was unmapped
			}
			if e != "" {
				continue
			}
			if o.MayMove && overlapping(st.before, o.NewAddr, o.NewAddr+o.NewLen) > 0 {
				seen["mremap onto a mapping"]++
			}
			if o.MayMove && o.Len == o.NewLen && overlapping(st.before, o.Addr, o.Addr+o.Len) > 1 {
				seen["mremap moving several VMAs"]++
			}
			if !o.MayMove && o.NewLen < o.Len && overlapping(st.before, o.Addr, o.Addr+o.Len) > 1 {
				seen["mremap shrinking across VMAs"]++
			}
		}
	}
	return seen
}

// Each harder family reaches what its Doc says, over the 80 seeds the
// differential test replays.
func TestFamiliesReach(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"long":     {"300 ops"},
		"deepfork": {"depth 3"},
		"remap":    {"mremap onto a mapping", "mremap moving several VMAs", "mremap shrinking across VMAs", "mremap EFAULT", "mremap ENOMEM"},
		"fileedge": {"mmap EOVERFLOW", "file VMA at an offset within 4 GiB of 2^63", "peek SIGBUS BUS_ADRERR"},
		"top":      {"VMA ending at TASK_SIZE", "mmap ENOMEM", "mremap EINVAL", "munmap EINVAL"},
		"tiny":     {"mmap EEXIST", "mremap ENOMEM"},
		"huge":     {"VMA of 512 MiB or more", "peek SIGBUS BUS_ADRERR"},
		"execonly": {"exec ran a ret", "mprotect to --x", "exec notret", "exec SIGSEGV SEGV_ACCERR", "write EFAULT"},
		"low":      {"mremap onto a mapping"},
	}
	// What the execonly family reaches only with protection keys (the
	// model of x86-64-pku; the differential test runs it on the host's).
	wantPKU := []string{"peek SIGSEGV SEGV_PKUERR", "touch SIGSEGV SEGV_PKUERR", "poke SIGSEGV SEGV_PKUERR"}
	t.Run("execonly/pku", func(t *testing.T) {
		seen := familyCoverage(t, "execonly", *familySeeds, machine.MustNamed("x86-64-pku").Features)
		for _, w := range wantPKU {
			if seen[w] == 0 {
				t.Errorf("%d traces never reach %q (seen: %v)", *familySeeds, w, seen)
			}
		}
	})
	// What the low family reaches only without CAP_SYS_RAWIO: a move onto
	// mappings whose range reaches page 0 fails after the unmap.
	t.Run("low/norawio", func(t *testing.T) {
		seen := familyCoverage(t, "low", *familySeeds, noRawio(t))
		if w := "mremap onto a mapping EPERM"; seen[w] == 0 {
			t.Errorf("%d traces never reach %q (seen: %v)", *familySeeds, w, seen)
		}
		t.Log(seen)
	})
	// Every family on the model of x86-64, a CPU without protection keys,
	// whatever this host has: with execonly/pku above, both settings run on
	// every host.
	x86 := machine.MustNamed("x86-64").Features
	for _, fam := range trace.Families[1:] {
		t.Run(fam.Name, func(t *testing.T) {
			seen := familyCoverage(t, fam.Name, *familySeeds, x86)
			for _, w := range want[fam.Name] {
				if seen[w] == 0 {
					t.Errorf("%d traces never reach %q (seen: %v)", *familySeeds, w, seen)
				}
			}
			if fam.Name == "execonly" {
				for _, w := range wantPKU {
					if seen[w] != 0 {
						t.Errorf("without protection keys, %d traces reach %q", seen[w], w)
					}
				}
			}
			if fam.Name == "deepfork" && seen["depth 3"] != *familySeeds {
				t.Errorf("%d of %d traces fork 3 deep", seen["depth 3"], *familySeeds)
			}
			if fam.Name == "long" && seen["300 ops"] != *familySeeds {
				t.Errorf("%d of %d traces have 300 ops", seen["300 ops"], *familySeeds)
			}
			t.Log(seen)
		})
	}
}

// noRawio is the machine the low family's failed moves need: this
// project's golden hosts' setting without CAP_SYS_RAWIO
// (mmap_min_addr.minaddr4096.lsm65536.norawio.golden's), where page 0 is
// refused.
func noRawio(t *testing.T) machine.Features {
	t.Helper()
	f, err := trace.SettingFeatures("minaddr4096.lsm65536.norawio", machine.MustNamed("x86-64").Features)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Every design of mm.GapFixes gives the same output for the low family's
// traces on a machine without CAP_SYS_RAWIO, where the moves that fail do
// so after the destination was gathered (mm.GapFixGather: the failed move
// ends as vms_abort_munmap_vmas() ends, the destination unmapped, as v6.19
// leaves it). The differential test runs the family on both targets with
// this host's capabilities (run it under setpriv --bounding-set=-sys_rawio
// --inh-caps=-sys_rawio for these).
func TestFamilyLowDesignsAgree(t *testing.T) {
	f := noRawio(t)
	for s := int64(1); s <= int64(*familySeeds); s++ {
		p := trace.Generate(s, trace.GenOptions{Family: "low"})
		var want string
		for i, g := range mm.GapFixes.Values() {
			var out bytes.Buffer
			if err := RunWith(context.Background(), f, mm.Config{GapFix: g}, p, &out); err != nil {
				t.Fatalf("seed %d (%s): %v", s, g, err)
			}
			if i == 0 {
				want = out.String()
			} else if d := trace.Diff(want, out.String()); d != "" {
				t.Errorf("seed %d: %s differs from %s:\n%s", s, g, mm.GapFixes.Values()[0], d)
			}
		}
	}
}
