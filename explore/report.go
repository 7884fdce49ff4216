package explore

import (
	"fmt"
	"io"
)

// WriteReport prints what Explore did and, for a failure, the shrunk
// interleaving, the command that replays the file at path and how to pin
// it: the same for the same seed (no timing).
func WriteReport(w io.Writer, rep Report, path string) {
	f := rep.Failure
	if f == nil {
		fmt.Fprintf(w, "%s (%s): %d %s schedules of seed %d, no property failed\n",
			rep.Scenario, rep.Design, rep.Schedules, rep.Strategy, rep.Seed)
		return
	}
	steps := Steps(f.Outcome.Record, f.Outcome.Final)
	fmt.Fprintf(w, "%s (%s): %s failed in %s schedule %d of seed %d\n",
		rep.Scenario, rep.Design, f.Violation.Property, rep.Strategy, f.Schedule, rep.Seed)
	fmt.Fprintf(w, "shrunk from %d deviations to %d (%s), %d steps:\n", f.Found, len(f.Deviations), FormatDeviations(f.Deviations), len(steps))
	WriteInterleaving(w, steps, f.Violation)
	fmt.Fprintf(w, "\nreplay: mmlab explore --replay %s\npin it: copy %s into explore/testdata/ (TestPinnedReplays replays every file there)\n", path, path)
}
