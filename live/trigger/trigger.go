// Package trigger is the live side of seed 004's trigger benchmark
// (mmlab/experiment/trigger): the producer loop of package uprobe on the
// running kernel, each case without a probe once and with one in every
// attach mode.
package trigger

import (
	"context"
	"fmt"

	"mmlab/experiment"
	"mmlab/experiment/trigger"
	"mmlab/live/uprobe"
)

// Run measures every case at every producer count on the live kernel: the
// cases without a probe under trigger.AttachNone, the others in each attach
// mode, and emits each result when it is measured.
func Run(ctx context.Context, o *trigger.Options, env experiment.Env, emit func(trigger.Result)) error {
	if err := uprobe.Supported(); err != nil {
		return err
	}
	row := experiment.LiveRow
	for _, group := range append([]string{trigger.AttachNone}, o.Attach...) {
		mode, _ := uprobe.ParseMode(group) // AttachNone: no probe, no mode
		for _, name := range o.Cases {
			c, _ := trigger.LookupCase(name)
			if c.Probed == (group == trigger.AttachNone) {
				continue
			}
			for _, n := range o.CPUs {
				res, err := uprobe.Trigger(ctx, uprobe.TriggerConfig{Case: c, Mode: mode, CPUs: n,
					Warmup: o.Warmup.D(), Duration: o.Duration.D(), Interval: o.Interval.D()})
				if err != nil {
					return fmt.Errorf("%s %s %d cpus: %w", name, group, n, err)
				}
				r := trigger.NewResult(row, group, name, n, res.Samples, res.Calls, res.Hits)
				env.Progress("%s: %s", group, trigger.FormatLine(name, n, r.Mops, r.MopsStddev))
				emit(r)
			}
		}
	}
	trigger.NoteLoad(o, env)
	return nil
}
