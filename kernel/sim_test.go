package kernel_test

import (
	"slices"
	"testing"
	"time"

	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/sched"
)

// SimConfigOf gives sched a description's post-idle points, rounded to
// the nanosecond, and a named description, which has none, none.
func TestSimConfigOfPostIdle(t *testing.T) {
	d := machine.MustNamed("epyc-vm-32")
	cfg, err := kernel.SimConfigOf(d, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Costs.PostIdle != nil {
		t.Errorf("%s: post-idle %v, want none", d.Name, cfg.Costs.PostIdle)
	}
	d.PostIdle = machine.PostIdle{Points: []machine.IdlePoint{{IdleNS: 50e3, ExtraNS: 1000.4}, {IdleNS: 4e6, ExtraNS: 30e3}}, Source: "test"}
	if cfg, err = kernel.SimConfigOf(d, 2, time.Second); err != nil {
		t.Fatal(err)
	}
	want := []sched.IdleCost{{Idle: 50 * time.Microsecond, Extra: 1000}, {Idle: 4 * time.Millisecond, Extra: 30 * time.Microsecond}}
	if !slices.Equal(cfg.Costs.PostIdle, want) {
		t.Errorf("post-idle %v, want %v", cfg.Costs.PostIdle, want)
	}
}
