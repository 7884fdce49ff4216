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

// With Config.HostPriority a model thread's OS thread takes the host
// priority of its model priority, and SetPrio changes it; without it the
// OS thread keeps the process's.
func TestHostPriority(t *testing.T) {
	type attr struct {
		policy   uint32
		nice     int32
		priority uint32
	}
	read := func() attr {
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			t.Errorf("sched_getattr: %v", err)
			return attr{}
		}
		return attr{a.Policy, a.Nice, a.Priority}
	}
	base := read()
	for _, on := range []bool{false, true} {
		s := New(Config{CPUs: 1, HostPriority: on})
		var normal, nice, changed attr
		s.Spawn(0, 0, func(*Thread) { normal = read() })
		th := s.Spawn(0, 15, func(th *Thread) {
			nice = read()
			th.SetPrio(-2)
			changed = read()
		})
		<-th.Done()
		s.Stop()
		if !on {
			for _, got := range []attr{normal, nice, changed} {
				if got != base {
					t.Errorf("without HostPriority: OS thread has %+v, want the process's %+v", got, base)
				}
			}
			continue
		}
		if !s.HostPriority() {
			t.Skipf("no host priorities here (SCHED_FIFO needs CAP_SYS_NICE)")
		}
		if want := (attr{unix.SCHED_FIFO, 0, 1}); normal != want {
			t.Errorf("priority 0: OS thread has %+v, want SCHED_FIFO 1 %+v", normal, want)
		}
		if want := (attr{unix.SCHED_NORMAL, 15, 0}); nice != want {
			t.Errorf("priority 15: OS thread has %+v, want nice 15 %+v", nice, want)
		}
		if want := (attr{unix.SCHED_FIFO, 0, 3}); changed != want {
			t.Errorf("after SetPrio(-2): OS thread has %+v, want SCHED_FIFO 3 %+v", changed, want)
		}
	}
}
