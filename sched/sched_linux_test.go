package sched

import (
	"testing"

	"golang.org/x/sys/unix"
)

// On Linux a thread is pinned to its CPU's host core, and an IPI handler runs
// on the target thread's own OS thread.
func TestPinnedAndIPIOnSameOSThread(t *testing.T) {
	s := NewSystem(2)
	defer s.Stop()
	if s.CPU(1).Host < 0 {
		t.Skip("no host CPU affinity available")
	}
	started := make(chan struct{})
	var tid, handlerTid int
	var affinity unix.CPUSet
	var affErr error
	stop := false
	th := s.Spawn(1, 0, func(th *Thread) {
		tid = unix.Gettid()
		affErr = unix.SchedGetaffinity(0, &affinity)
		close(started)
		for !stop {
			th.Point()
		}
	})
	<-started
	s.CPU(1).IPI(func(*Thread) { handlerTid = unix.Gettid(); stop = true })
	<-th.Done()
	if affErr != nil {
		t.Fatalf("sched_getaffinity: %v", affErr)
	}
	if affinity.Count() != 1 || !affinity.IsSet(s.CPU(1).Host) {
		t.Errorf("thread affinity has %d CPUs, want only host CPU %d", affinity.Count(), s.CPU(1).Host)
	}
	if handlerTid != tid {
		t.Errorf("IPI handler ran on OS thread %d, want the target's %d", handlerTid, tid)
	}
}

// Config.Hosts backs each model CPU by the host CPU it names (an index
// into the affinity mask, modulo its size); CPUs it does not name keep
// NewSystem's.
func TestConfigHosts(t *testing.T) {
	hosts := hostCPUs()
	if len(hosts) == 0 {
		t.Skip("no host CPU affinity available")
	}
	s := New(Config{CPUs: 4, Hosts: []int{0, 1, 1}})
	defer s.Stop()
	want := []int{hosts[0], hosts[1%len(hosts)], hosts[1%len(hosts)], hosts[3%len(hosts)]}
	for i, h := range want {
		if got := s.CPU(i).Host; got != h {
			t.Errorf("model CPU %d on host CPU %d, want %d", i, got, h)
		}
	}
}
