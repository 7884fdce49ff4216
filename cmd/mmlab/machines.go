package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"mmlab/experiment"
	"mmlab/machine"
)

func init() {
	register(&command{
		name:    "machines",
		summary: "list the machines the model can run on (--machine): host, as read here, and the named descriptions",
		run: func(ctx context.Context, args []string) int {
			return machinesMain(args, os.Stdout, os.Stderr)
		},
	})
}

const machinesUsage = `usage: mmlab machines

Lists the machines the model can run on, the values of --machine of
'mmlab run', 'mmlab all', 'mmlab replay' and 'mmlab explore': host, this
host's features and kernel as mmlab read them (the default, and the machine
of every comparison with the live kernel), then each named description with
its features and where its figures come from.

Each description also has what a simulated machine charges: its topology,
clock, mitigations and costs in nanoseconds, each cost with its source.
The host's come from 'mmlab calibrate', which writes them to the file named
under host; until then the host has none.
`

// machinesMain is `mmlab machines`, writing to out and errw.
func machinesMain(args []string, out, errw io.Writer) int {
	fs := flag.NewFlagSet("machines", flag.ContinueOnError)
	fs.SetOutput(errw)
	fs.Usage = func() { fmt.Fprint(errw, machinesUsage) }
	if err := fs.Parse(args); err != nil {
		return flagsFailed(err, nil, nil)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(errw, "mmlab machines: unexpected argument %q\n", fs.Arg(0))
		return experiment.ExitUsage
	}
	for i, name := range machine.Names() {
		d, err := machine.Lookup(name)
		if err != nil { // Names lists what Lookup knows
			fmt.Fprintf(errw, "mmlab machines: %v\n", err)
			return experiment.ExitFailed
		}
		if i > 0 {
			fmt.Fprintln(out)
		}
		writeMachine(out, d)
		if name == "host" {
			writeHostCosts(out)
		} else {
			writeCosts(out, d)
		}
	}
	return experiment.ExitOK
}

// writeMachine prints d: its name, features, kernel and source.
func writeMachine(w io.Writer, d machine.Description) {
	f, k := d.Features, d.Kernel
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	fmt.Fprintf(w, "%s\n", d.Name)
	fmt.Fprintf(w, "  features: protection keys (ospke) %s, 5-level paging (la57) %s, mmap_min_addr %d (vm.mmap_min_addr %d, CONFIG_LSM_MMAP_MIN_ADDR %d), CAP_SYS_RAWIO %s\n",
		yes(f.OSPKE), yes(f.LA57), f.MinAddr(), f.MmapMinAddr, f.LSMMmapMinAddr, yes(f.CapSysRawio))
	kernel := []string{"release " + k.Release, fmt.Sprintf("%d CPUs", k.CPUs)}
	if k.HZ != 0 {
		kernel = append(kernel, fmt.Sprintf("HZ=%d", k.HZ))
	}
	if k.Preempt != "" {
		kernel = append(kernel, "preempt "+k.Preempt)
	}
	if k.MemBytes != 0 {
		kernel = append(kernel, fmt.Sprintf("%.1f GiB", float64(k.MemBytes)/(1<<30)))
	}
	fmt.Fprintf(w, "  kernel:   %s\n", strings.Join(kernel, ", "))
	if k.Mitigations != "" {
		fmt.Fprintf(w, "  mitigations: %s\n", k.Mitigations)
	}
	if d.Source != "" {
		fmt.Fprintf(w, "  source:   %s\n", d.Source)
	}
}

// writeHostCosts prints the host's calibrated costs, or where calibrate
// would write them.
func writeHostCosts(w io.Writer) {
	path, _ := machine.HostFile()
	d, err := machine.Simulated("host")
	if err != nil {
		fmt.Fprintf(w, "  costs:    none: %v\n", err)
		return
	}
	fmt.Fprintf(w, "  calibrated: %s (%s)\n", path, d.Source)
	writeCosts(w, d)
}

// writeCosts prints d's topology, clock, mitigations and costs, each cost
// with its source.
func writeCosts(w io.Writer, d machine.Description) {
	t := d.Topology
	fmt.Fprintf(w, "  topology: sockets × cores × threads %d × %d × %d = %d CPUs, cores per last-level cache %d, NUMA nodes %d, numbered %s (%s)\n",
		t.Sockets, t.CoresPerSocket, t.ThreadsPerCore, t.CPUs, t.CoresPerLLC, t.NUMANodes, t.Numbering, t.Source)
	fmt.Fprintf(w, "  clock:    %.3f GHz (%s)\n", d.Clock.GHz, d.Clock.Source)
	fmt.Fprintf(w, "  costs, ns:\n")
	d.Costs.Each(func(name string, c *machine.Cost) {
		fmt.Fprintf(w, "    %-15s %8.1f  %s\n", name, c.NS, c.Source)
		if n := len(c.Samples); n > 0 {
			v := slices.Sorted(slices.Values(c.Samples))
			fmt.Fprintf(w, "    %-15s           each event drawn from %d measured: median %.1f, 99th percentile %.1f, at most %.1f\n",
				"", n, v[n/2], v[min(n*99/100, n-1)], v[n-1])
		}
	})
	fmt.Fprintf(w, "  noise:    %s\n", d.Noise)
	fmt.Fprintf(w, "  post-idle: %s\n", d.PostIdle)
}
