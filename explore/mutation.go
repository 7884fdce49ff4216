package explore

import (
	"fmt"
	"slices"
)

// FindUndoneFix is a mutation test of one fix: sc must pass every schedule
// of o as the model is, and with undo taking the fix out of each run's
// World (a package's UndoFix in its tests) Explore must fail it with one of
// props. It returns the report of the second exploration, and an error
// saying which of the three went wrong.
func FindUndoneFix(sc *Scenario, o Options, undo func(w *World), props []Property) (Report, error) {
	if rep, err := Explore(sc, o); err != nil || rep.Failure != nil {
		if err != nil {
			return rep, err
		}
		return rep, fmt.Errorf("%s fails in the %v design: %v", sc.Name, o.Design, rep.Failure.Violation)
	}
	rep, err := Explore(sc.WithSetup(undo), o)
	if err != nil {
		return rep, err
	}
	if rep.Failure == nil {
		return rep, fmt.Errorf("%s: %d schedules and the undone fix went unnoticed", sc.Name, rep.Schedules)
	}
	if v := rep.Failure.Violation; !slices.Contains(props, v.Property) {
		return rep, fmt.Errorf("%s: the undone fix failed %v, want one of %v", sc.Name, v, props)
	}
	return rep, nil
}
