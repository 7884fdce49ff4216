package trace

import (
	"reflect"
	"strings"
	"testing"
)

func TestGenerateRoundTrip(t *testing.T) {
	t.Parallel()
	for seed := range int64(500) {
		p := Generate(seed, GenOptions{})
		q, err := Parse(strings.NewReader(p.String()))
		if err != nil {
			t.Fatalf("seed %d: generated trace does not parse: %v\n%s", seed, err, p)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("seed %d: round trip differs:\n%s\n%s", seed, p, q)
		}
	}
}

// Every family's traces are valid (they parse: arena, ranges, lengths, files)
// and print back to themselves.
func TestGenerateFamiliesRoundTrip(t *testing.T) {
	t.Parallel()
	for _, fam := range Families {
		for seed := range int64(300) {
			p := Generate(seed, GenOptions{Family: fam.Name})
			q, err := Parse(strings.NewReader(p.String()))
			if err != nil {
				t.Fatalf("%s seed %d: generated trace does not parse: %v\n%s", fam.Name, seed, err, p)
			}
			if !reflect.DeepEqual(p, q) {
				t.Fatalf("%s seed %d: round trip differs:\n%s\n%s", fam.Name, seed, p, q)
			}
		}
	}
}

// The arenas of top end at TASK_SIZE or 2^47 a few pages above their start;
// those of tiny hold 2 to 8 pages.
func TestGenerateFamilyArenas(t *testing.T) {
	t.Parallel()
	for seed := range int64(100) {
		top := Generate(seed, GenOptions{Family: "top"})
		if (top.ArenaHi != MaxUserAddr && top.ArenaHi != MaxUserAddr-PageSize) || top.ArenaLo < MaxUserAddr-26*PageSize {
			t.Errorf("top seed %d: arena %#x-%#x", seed, top.ArenaLo, top.ArenaHi)
		}
		tiny := Generate(seed, GenOptions{Family: "tiny"})
		if n := (tiny.ArenaHi - tiny.ArenaLo) / PageSize; n < 2 || n > 8 {
			t.Errorf("tiny seed %d: arena %#x-%#x", seed, tiny.ArenaLo, tiny.ArenaHi)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a, b := Generate(7, GenOptions{}), Generate(7, GenOptions{})
	if a.String() != b.String() {
		t.Error("same seed, different traces")
	}
	if Generate(7, GenOptions{}).String() == Generate(8, GenOptions{}).String() {
		t.Error("different seeds, same trace")
	}
	if n := len(Generate(1, GenOptions{Ops: 300, Files: 1}).Ops); n < 301 {
		t.Errorf("Ops: 300 gave %d ops", n)
	}
}

// Over a few dozen seeds, the generator emits every op, flag, protection and
// mremap kind, nests forks, and aims most accesses at mapped pages.
func TestGenerateCoverage(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for seed := range int64(50) {
		p := Generate(seed, GenOptions{})
		depth := 0
		for _, o := range p.Ops {
			seen[o.Kind.String()] = true
			switch o.Kind {
			case OpMmap:
				seen["prot "+o.Prot.String()] = true
				seen[map[bool]string{true: "shared", false: "private"}[o.Shared]] = true
				seen[map[bool]string{true: "file", false: "anon"}[o.File != ""]] = true
				seen[map[bool]string{true: "fixed", false: "noreplace"}[o.Fixed]] = true
				if o.Populate {
					seen["populate"] = true
				}
			case OpMremap:
				switch {
				case o.MayMove:
					seen["mremap move"] = true
				case o.NewLen < o.Len:
					seen["mremap shrink"] = true
				case o.NewLen > o.Len:
					seen["mremap grow"] = true
				}
			case OpFork:
				depth++
				if depth >= 2 {
					seen["nested fork"] = true
				}
			case OpExit:
				depth--
			}
		}
	}
	want := []string{"file", "mmap", "munmap", "mprotect", "mremap", "touch", "poke", "peek", "fork", "exit", "maps",
		"shared", "private", "file", "anon", "fixed", "noreplace", "populate",
		"mremap move", "mremap shrink", "mremap grow", "nested fork"}
	for p := range 8 {
		want = append(want, "prot "+Prot(p).String())
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("50 generated traces never emit %q", w)
		}
	}
}
