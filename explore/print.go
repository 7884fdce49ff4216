package explore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"mmlab/machine"
	"mmlab/sched"
)

// Step is one stretch of a run during which one task ran: from the
// preemption point it was at to the one where another task took over, in
// kernel terms ("down_write(dup_mmap_sem)", "block(mmap_lock)", "exit"),
// with the locks it held there.
type Step struct {
	Task   string // "T3(tracer)"
	From   string // where it resumed ("start" for its first stretch)
	To     string // where it stopped
	Holds  []sched.Held
	Forced bool // it stopped because the schedule switched away (a deviation), not because it blocked or exited
}

func point(op, obj string) string {
	if obj == "" {
		return op
	}
	return op + "(" + obj + ")"
}

// Steps turns a run's record into its stretches; final, the tasks' states
// at a failed check, ends the last one.
func Steps(rec *sched.Record, final []sched.ThreadState) []Step {
	name := func(id int) string { return fmt.Sprintf("T%d(%s)", id, rec.Names[id]) }
	at := map[int]string{}
	var steps []Step
	cur := 0
	for _, d := range rec.Decisions {
		if d.From != 0 && d.Next != d.From {
			from := at[d.From]
			if from == "" {
				from = "start"
			}
			to := point(d.Op, d.Obj)
			steps = append(steps, Step{Task: name(d.From), From: from, To: to, Holds: d.Holds,
				Forced: d.Op != "block" && d.Op != "exit"})
			at[d.From] = to
		}
		cur = d.Next
	}
	from := at[cur]
	if from == "" {
		from = "start"
	}
	for _, t := range final {
		if t.ID == cur {
			return append(steps, Step{Task: name(cur), From: from, To: point(t.Op, t.Obj), Holds: t.Holds})
		}
	}
	if final != nil && cur != 0 {
		// The task that ran last is not among the live ones: it exited
		// (a reader that saw the failure and returned), at the decision
		// whose check failed.
		steps = append(steps, Step{Task: name(cur), From: from, To: "exit"})
	}
	return steps
}

// WriteInterleaving prints the steps, one line each, then what failed.
func WriteInterleaving(w io.Writer, steps []Step, v *Violation) {
	for i, s := range steps {
		how := "blocks"
		switch {
		case i == len(steps)-1 && v != nil:
			how = "fails here"
		case s.Forced:
			how = "preempted"
		case strings.HasPrefix(s.To, "exit"):
			how = "exits"
		}
		holds := "nothing"
		if len(s.Holds) > 0 {
			var hs []string
			for _, h := range s.Holds {
				hs = append(hs, h.String())
			}
			holds = strings.Join(hs, " ")
		}
		fmt.Fprintf(w, "%3d  %-16s %s -> %s  [%s]  holding %s\n", i+1, s.Task, s.From, s.To, how, holds)
	}
	if v != nil {
		fmt.Fprintf(w, "property failed: %s\n  %s\n", v.Property, strings.ReplaceAll(v.Detail, "\n", "\n  "))
	}
}

// replayMagic is the first line of a replay file.
const replayMagic = "mmlab explore replay v1"

// Pinned is an interleaving to replay: a scenario, the machine, a design
// and the deviations, with the property it failed when it was found.
type Pinned struct {
	Scenario string
	// Machine is the name of the machine description the interleaving
	// ran on, one of machine.Names(); "host" for a file written before
	// replay files named it.
	Machine    string
	Design     Design
	Property   Property
	Deviations []Deviation
}

// ErrReplayFile marks a replay file that cannot be read.
var ErrReplayFile = errors.New("bad replay file")

// WriteReplay writes p in the replay file format: a first line, then
// "scenario", "machine", "design", "property" and "deviations
// CHOICE:THREAD ..." lines.
func WriteReplay(w io.Writer, p Pinned) error {
	_, err := fmt.Fprintf(w, "%s\nscenario %s\nmachine %s\ndesign %s\nproperty %s\ndeviations %s\n",
		replayMagic, p.Scenario, p.Machine, p.Design, p.Property, FormatDeviations(p.Deviations))
	return err
}

// ReadReplay reads a replay file; one without a machine line (written
// before replay files had it) ran on "host".
func ReadReplay(r io.Reader) (Pinned, error) {
	p := Pinned{Machine: "host"}
	sc := bufio.NewScanner(r)
	if !sc.Scan() || sc.Text() != replayMagic {
		return p, fmt.Errorf("%w: want %q first", ErrReplayFile, replayMagic)
	}
	seen := map[string]bool{}
	for sc.Scan() {
		key, val, _ := strings.Cut(sc.Text(), " ")
		seen[key] = true
		switch key {
		case "scenario":
			if Lookup(val) == nil {
				return p, fmt.Errorf("%w: unknown scenario %q", ErrReplayFile, val)
			}
			p.Scenario = val
		case "machine":
			if !slices.Contains(machine.Names(), val) {
				return p, fmt.Errorf("%w: unknown machine %q: want one of %s", ErrReplayFile, val, strings.Join(machine.Names(), ", "))
			}
			p.Machine = val
		case "design":
			d, err := Designs.Parse(val)
			if err != nil {
				return p, fmt.Errorf("%w: %v", ErrReplayFile, err)
			}
			p.Design = d
		case "property":
			p.Property = Property(val)
		case "deviations":
			for _, f := range strings.Fields(val) {
				c, t, ok := strings.Cut(f, ":")
				ci, err1 := strconv.Atoi(c)
				ti, err2 := strconv.Atoi(t)
				if !ok || err1 != nil || err2 != nil || ci < 0 || ti <= 0 {
					return p, fmt.Errorf("%w: deviation %q: want CHOICE:THREAD", ErrReplayFile, f)
				}
				p.Deviations = append(p.Deviations, Deviation{Choice: ci, Thread: ti})
			}
		default:
			return p, fmt.Errorf("%w: unknown line %q", ErrReplayFile, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return p, err
	}
	if !seen["scenario"] || !seen["design"] {
		return p, fmt.Errorf("%w: no scenario or design line", ErrReplayFile)
	}
	if err := Lookup(p.Scenario).checkDesign(p.Design); err != nil {
		return p, fmt.Errorf("%w: %v", ErrReplayFile, err)
	}
	return p, nil
}

// FormatDeviations writes devs as the replay file does: "CHOICE:THREAD ...".
func FormatDeviations(devs []Deviation) string {
	var s []string
	for _, d := range devs {
		s = append(s, fmt.Sprintf("%d:%d", d.Choice, d.Thread))
	}
	return strings.Join(s, " ")
}
