package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"mmlab/machine"
)

// mmlab machines lists every name --machine takes, host first with what
// was read from this host, each with its features and source.
func TestMachines(t *testing.T) {
	var out, errb bytes.Buffer
	if code := machinesMain(nil, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	blocks := strings.Split(out.String(), "\n\n")
	if len(blocks) != len(machine.Names()) {
		t.Fatalf("%d descriptions printed, want %d (%v):\n%s", len(blocks), len(machine.Names()), machine.Names(), out.String())
	}
	for i, name := range machine.Names() {
		d, err := machine.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		f := d.Features
		want := []string{
			name + "\n",
			fmt.Sprintf("(ospke) %s,", yesNo(f.OSPKE)),
			fmt.Sprintf("(la57) %s,", yesNo(f.LA57)),
			fmt.Sprintf("mmap_min_addr %d (vm.mmap_min_addr %d, CONFIG_LSM_MMAP_MIN_ADDR %d)", f.MinAddr(), f.MmapMinAddr, f.LSMMmapMinAddr),
			"CAP_SYS_RAWIO " + yesNo(f.CapSysRawio),
			"release " + d.Kernel.Release,
			"source:   " + d.Source,
		}
		for _, w := range want {
			if !strings.Contains(blocks[i], w) {
				t.Errorf("%s: %q lacks %q", name, blocks[i], w)
			}
		}
	}
	if !strings.HasPrefix(blocks[0], "host\n") || !strings.Contains(blocks[0], "read from /proc") {
		t.Errorf("the first description is not the host as read: %q", blocks[0])
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// TestExperimentHelp runs every experiment's --help: it exits 0 and prints
// each flag's default without the flag package's panic report (a flag
// Value whose zero value cannot print itself).
func TestExperimentHelp(t *testing.T) {
	for _, e := range boundExperiments {
		var out bytes.Buffer
		code := e.Main(context.Background(), []string{"--help"}, &out, &out)
		if code != 0 || strings.Contains(out.String(), "panic") || !strings.Contains(out.String(), "-target") {
			t.Errorf("mmlab run %s --help: exit %d, output:\n%s", e.Name(), code, out.String())
		}
	}
}
