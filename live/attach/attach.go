// Package attach is the live side of the attach experiment
// (mmlab/experiment/attach): attach and detach N uprobes on the sled of
// this binary through package uprobe, on the running kernel.
package attach

import (
	"context"
	"fmt"
	"slices"
	"time"

	"mmlab/experiment"
	"mmlab/experiment/attach"
	"mmlab/live/uprobe"
)

// The live sled has a probe site for every count the experiment allows.
var _ [uprobe.SledLen - attach.MaxProbes]struct{}

// Run times attach and detach on the live kernel. The runs go round-robin
// over counts and modes so that every cell sees the same machine. Attach is
// the link creation alone (the BPF program is loaded before the clock
// starts); detach is closing every link and the program. After each detach,
// a probe of the same mode on the nop5 target times the target's first
// call, which optimizes the site, against later calls (uprobe.FirstHit).
func Run(ctx context.Context, o *attach.Options, env experiment.Env, emit func(attach.Result)) error {
	if err := uprobe.Supported(); err != nil {
		return err
	}
	path, offsets, err := uprobe.SledOffsets(slices.Max(o.N))
	if err != nil {
		return err
	}
	o.Probed = path
	type cell struct {
		attach, detach, first, hit []float64
		optimized                  bool
	}
	cells := map[string]*cell{}
	for run := range o.Runs {
		env.Progress("round %d of %d", run+1, o.Runs)
		for _, n := range o.N {
			for _, m := range o.Attach {
				mode, _ := uprobe.ParseMode(m)
				if err := experiment.Sleep(ctx, o.Gap.D()); err != nil {
					return err
				}
				p, err := uprobe.Attach(ctx, uprobe.Spec{Path: path, Offsets: offsets[:n], Mode: mode})
				if err != nil {
					return fmt.Errorf("%s n=%d: %w", m, n, err)
				}
				start := time.Now()
				err = p.Close()
				detach := time.Since(start)
				if err != nil {
					return fmt.Errorf("%s n=%d: %w", m, n, err)
				}
				key := fmt.Sprint(m, n)
				if cells[key] == nil {
					cells[key] = &cell{optimized: true}
				}
				c := cells[key]
				c.attach = append(c.attach, attach.Ms(p.LinkTime()))
				c.detach = append(c.detach, attach.Ms(detach))
				fh, err := uprobe.FirstHit(ctx, mode, attach.LaterHits)
				if err != nil {
					return fmt.Errorf("%s n=%d: nop5 first hit: %w", m, n, err)
				}
				c.first, c.hit = append(c.first, attach.Us(fh.First)), append(c.hit, attach.Us(fh.Hit))
				c.optimized = c.optimized && fh.Optimized
			}
		}
	}
	row := experiment.LiveRow
	for _, n := range o.N {
		for _, m := range o.Attach {
			c := cells[fmt.Sprint(m, n)]
			r := attach.NewResult(row, m, n, c.attach, c.detach)
			r.FirstHit = attach.NewFirstHit(c.first, c.hit, c.optimized)
			emit(r)
		}
	}
	return nil
}
