package main

import (
	"errors"
	"strings"
	"testing"

	"mmlab/deploy"
	"mmlab/experiment"
	"mmlab/experiment/seeds"
)

// FuzzExperimentArgs gives every experiment's option check arbitrary
// command lines: it never panics, and what it refuses is a usage error.
func FuzzExperimentArgs(f *testing.F) {
	for _, e := range boundExperiments {
		f.Add(e.Name() + " " + strings.Join(e.Settings().Quick, " "))
	}
	f.Add("forkstall --runs -1 --size 99999999999G --cases ,,")
	f.Add("mapscan --duration 1ns --runs 0")
	f.Add("maptear --reads -3 --cases split,bogus")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if len(args) == 0 {
			return
		}
		for _, e := range boundExperiments {
			if e.Name() != args[0] {
				continue
			}
			if err := e.Check(args[1:]); err != nil && !errors.Is(err, experiment.ErrUsage) {
				t.Fatalf("%q: %v is not a usage error", line, err)
			}
		}
	})
}

// The fleet manifest's command line is one mmlab accepts.
func TestDeployCommandAccepted(t *testing.T) {
	args, err := deploy.CheckArgs()
	if err != nil {
		t.Fatal(err)
	}
	if len(args) < 2 || args[0] != "run" {
		t.Fatalf("manifest command %q is not `mmlab run EXPERIMENT ...`", args)
	}
	e := findExperiment(args[1])
	if e == nil {
		t.Fatalf("manifest runs an unknown experiment %q", args[1])
	}
	if err := e.Check(args[2:]); err != nil {
		t.Errorf("mmlab refuses the manifest's command %q: %v", args, err)
	}
}

// Every step of `mmlab all`, in every setting, and every point of the
// full setting's sim sweep is a command line its experiment accepts.
func TestAllStepsAccepted(t *testing.T) {
	for _, setting := range []string{"quick", "full", "smoke", "points"} {
		steps := seedsPlan(setting)
		if setting == "points" {
			steps = seeds.Points(seeds.All())
		}
		for _, st := range steps {
			args := st.RunArgs("both", "host", "DIR")
			e := findExperiment(st.Experiment)
			if e == nil {
				t.Errorf("%s: unknown experiment %q", setting, st.Experiment)
				continue
			}
			if err := e.Check(args); err != nil {
				t.Errorf("%s: mmlab run %s %q: %v", setting, st.Experiment, args, err)
			}
		}
	}
}

func seedsPlan(setting string) []seeds.PlannedStep { return seeds.Plan(seeds.All(), setting) }
