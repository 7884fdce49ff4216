package smp

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"mmlab/sched"
)

// Profile is a sim run's contention profile, as perf c2c reports one: the
// cache lines that moved between CPUs.
type Profile struct {
	// Machine is the description the costs come from ("" if none).
	Machine string `json:"machine,omitempty"`
	CPUs    int    `json:"cpus"`
	// Lines are the lines that moved at least once, most transfers first
	// (then by name); lines of one name (each child's mmap_lock) are
	// summed into one.
	Lines []LineProfile `json:"lines"`
	// Transfers and CostNS sum the lines'.
	Transfers int64 `json:"transfers"`
	CostNS    int64 `json:"cost_ns"`
}

// LineProfile is one line of a Profile.
type LineProfile struct {
	Name  string        `json:"name"`
	Words []WordProfile `json:"words"`
	// Loads, Stores and RMWs are the accesses by the run's threads, over
	// every word of the line; Ops their sum.
	Loads  int64 `json:"loads"`
	Stores int64 `json:"stores"`
	RMWs   int64 `json:"rmws"`
	Ops    int64 `json:"ops"`
	// Transfers are the times the line moved to another CPU, ByClass by
	// distance; PerOp is Transfers/Ops.
	Transfers int64             `json:"transfers"`
	ByClass   [NumClasses]int64 `json:"by_class"` // smt, llc, socket, remote
	PerOp     float64           `json:"transfers_per_op"`
	// CostNS is the transfers' latency, WaitNS the time requesters
	// queued behind the line in flight.
	CostNS int64 `json:"cost_ns"`
	WaitNS int64 `json:"queue_ns"`
	// From and To count the transfers by the CPU the line left and the
	// CPU it went to.
	From map[int]int64 `json:"from_cpus"`
	To   map[int]int64 `json:"to_cpus"`
}

// WordProfile is one word of a line: its accesses.
type WordProfile struct {
	Name   string `json:"name"`
	Loads  int64  `json:"loads"`
	Stores int64  `json:"stores"`
	RMWs   int64  `json:"rmws"`
	// Transfers are the line's moves that this word's accesses made.
	Transfers int64 `json:"transfers"`
}

// C2C returns the contention profile of sim System s's run so far (an
// empty profile if no shared word was accessed, or s is not a sim
// System). Call it after Run, or from its running thread.
func C2C(s *sched.System) *Profile {
	p := &Profile{CPUs: s.NumCPU()}
	m, _ := s.SimMemory().(*memory)
	if m == nil {
		return p
	}
	if m.desc != nil {
		p.Machine = m.desc.Name
	}
	for _, st := range m.byName() {
		var total int64
		for _, n := range st.transfers {
			total += n
		}
		if total == 0 {
			continue
		}
		lp := LineProfile{Name: st.name, Transfers: total, ByClass: st.transfers, CostNS: st.cost, WaitNS: st.wait,
			From: maps.Clone(st.from), To: maps.Clone(st.to)}
		for i, ops := range st.ops {
			name := "?"
			if i < len(st.words) {
				name = st.words[i]
			}
			lp.Words = append(lp.Words, WordProfile{Name: name, Loads: ops[kindLoad], Stores: ops[kindStore], RMWs: ops[kindRMW], Transfers: st.moves[i]})
			lp.Loads += ops[kindLoad]
			lp.Stores += ops[kindStore]
			lp.RMWs += ops[kindRMW]
		}
		lp.Ops = lp.Loads + lp.Stores + lp.RMWs
		if lp.Ops > 0 {
			lp.PerOp = float64(lp.Transfers) / float64(lp.Ops)
		}
		p.Lines = append(p.Lines, lp)
		p.Transfers += lp.Transfers
		p.CostNS += lp.CostNS
	}
	slices.SortStableFunc(p.Lines, func(a, b LineProfile) int {
		if a.Transfers != b.Transfers {
			return int(min(max(b.Transfers-a.Transfers, -1), 1))
		}
		return strings.Compare(a.Name, b.Name)
	})
	return p
}

// Format prints p as perf c2c's "Shared Data Cache Line Table" does: one
// row per line, most transfers first, then each line's words.
func (p *Profile) Format(w io.Writer) {
	machine := p.Machine
	if machine == "" {
		machine = "no machine: lines move at no cost"
	}
	fmt.Fprintf(w, "=================================================\n")
	fmt.Fprintf(w, "           Shared Data Cache Line Table          \n")
	fmt.Fprintf(w, "=================================================\n")
	fmt.Fprintf(w, "#  %d CPUs, %s; %d transfers, %d ns\n#\n", p.CPUs, machine, p.Transfers, p.CostNS)
	fmt.Fprintf(w, "# %5s  %-28s %9s %9s %9s %9s  %9s %7s  %7s %7s %7s %7s  %11s %9s %9s  %s\n",
		"Index", "Line", "Ops", "Loads", "Stores", "RMWs", "Xfers", "Xfer/op", "SMT", "LLC", "Socket", "Remote", "Cost ns", "ns/xfer", "Queue ns", "From CPUs (xfers)")
	for i, l := range p.Lines {
		fmt.Fprintf(w, "  %5d  %-28s %9d %9d %9d %9d  %9d %7.3f  %7d %7d %7d %7d  %11d %9.1f %9d  %s\n",
			i, l.Name, l.Ops, l.Loads, l.Stores, l.RMWs, l.Transfers, l.PerOp,
			l.ByClass[ClassSMT], l.ByClass[ClassLLC], l.ByClass[ClassSocket], l.ByClass[ClassRemote],
			l.CostNS, float64(l.CostNS)/float64(l.Transfers), l.WaitNS, cpuCounts(l.From, 8))
	}
	fmt.Fprintf(w, "\n# %5s  %-28s %9s %9s %9s %9s\n", "Index", "Word", "Loads", "Stores", "RMWs", "Xfers")
	for i, l := range p.Lines {
		for _, wd := range l.Words {
			fmt.Fprintf(w, "  %5d  %-28s %9d %9d %9d %9d\n", i, wd.Name, wd.Loads, wd.Stores, wd.RMWs, wd.Transfers)
		}
	}
}

// cpuCounts prints the largest n entries of counts by CPU, "0:12 3:4 ...".
func cpuCounts(counts map[int]int64, n int) string {
	cpus := slices.Collect(maps.Keys(counts))
	slices.SortFunc(cpus, func(a, b int) int {
		if counts[a] != counts[b] {
			return int(min(max(counts[b]-counts[a], -1), 1))
		}
		return a - b
	})
	var b strings.Builder
	for i, c := range cpus {
		if i == n {
			fmt.Fprintf(&b, " +%d CPUs", len(cpus)-n)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d", c, counts[c])
	}
	return b.String()
}
