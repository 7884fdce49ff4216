package smp_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"mmlab/locking"
	"mmlab/machine"
	"mmlab/sched"
	"mmlab/smp"
)

// TestC2CReaders profiles four sim CPUs of xeon-gold-6138-2s taking a
// read lock n times each, an rwsem (mmap_lock) beside a per-CPU rwsem
// (dup_mmap_sem): every down_read and up_read of the rwsem moves its count
// line, and rwsem_set_reader_owned()'s store its owner line, while the
// per-CPU rwsem's readers write only their own CPU's read_count and only
// read block, so its lines move only to each CPU's first read of block.
func TestC2CReaders(t *testing.T) {
	const n = 200
	d := machine.MustNamed("xeon-gold-6138-2s")
	sys := sched.New(sched.Config{CPUs: 4, Seed: 1, Sim: &sched.SimConfig{Until: time.Second, Machine: &d}})
	mmapLock := locking.NewRWSem("mmap_lock")
	dupMmap := locking.NewPercpuRWSem("dup_mmap_sem", 4)
	for cpu := range 4 {
		sys.SpawnNamed(fmt.Sprintf("reader%d", cpu), cpu, 0, func(*sched.Thread) {
			for range n {
				mmapLock.DownRead(nil)
				sched.Charge(50 * time.Nanosecond)
				mmapLock.UpRead()
				dupMmap.DownRead(nil)
				sched.Charge(50 * time.Nanosecond)
				dupMmap.UpRead(nil)
				sched.Charge(200 * time.Nanosecond)
			}
		})
	}
	if _, err := sys.Run(); err != nil {
		t.Fatal(err)
	}
	p := smp.C2C(sys)
	var b bytes.Buffer
	p.Format(&b)
	t.Log("\n" + b.String())
	moved := map[string]smp.LineProfile{}
	for _, l := range p.Lines {
		moved[l.Name] = l
	}
	for _, name := range []string{"mmap_lock.count", "mmap_lock.owner"} {
		if moved[name].Transfers == 0 {
			t.Errorf("%s never moved", name)
		}
	}
	if c := moved["mmap_lock.count"]; c.RMWs < 2*4*n {
		t.Errorf("mmap_lock.count: %d RMWs, want at least %d", c.RMWs, 2*4*n)
	}
	for name := range moved {
		if strings.HasPrefix(name, "dup_mmap_sem") && (name != "dup_mmap_sem.block" || moved[name].Transfers > 3) {
			t.Errorf("%s moved %d times", name, moved[name].Transfers)
		}
	}
}
