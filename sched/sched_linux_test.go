package sched

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeHost records what a System asks of its Host, by the OS thread that
// asks (Host's methods act on the calling thread).
type fakeHost struct {
	cpus    []int
	fifoErr error // what SetFIFO returns

	mu   sync.Mutex
	pins map[int][]int  // by tid: the CPUs of its last Pin
	prio map[int]string // by tid: its last SetFIFO or SetNice
}

func newFakeHost(cpus ...int) *fakeHost {
	return &fakeHost{cpus: cpus, pins: map[int][]int{}, prio: map[int]string{}}
}

func (h *fakeHost) CPUs() ([]int, error) { return h.cpus, nil }

func (h *fakeHost) ThreadCPUTime() (time.Duration, bool) { return 0, false }

func (h *fakeHost) Pin(cpus ...int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pins[unix.Gettid()] = cpus
	return nil
}

func (h *fakeHost) SetFIFO(prio int) error {
	h.set(fmt.Sprint("SCHED_FIFO ", prio))
	return h.fifoErr
}

func (h *fakeHost) SetNice(nice int) error { h.set(fmt.Sprint("nice ", nice)); return nil }

func (h *fakeHost) set(p string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prio[unix.Gettid()] = p
}

// last returns what the calling OS thread was last pinned to and given.
func (h *fakeHost) last() ([]int, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pins[unix.Gettid()], h.prio[unix.Gettid()]
}

// With a Host a thread is pinned to its CPU's host core on its own OS
// thread, and an IPI handler runs on the target thread's OS thread.
func TestPinnedAndIPIOnSameOSThread(t *testing.T) {
	h := newFakeHost(3, 7)
	s := New(Config{CPUs: 2, Host: h})
	defer s.Stop()
	if s.CPU(1).Host != 7 {
		t.Fatalf("model CPU 1 on host CPU %d, want 7", s.CPU(1).Host)
	}
	started := make(chan struct{})
	var tid, handlerTid int
	var pinned []int
	stop := false
	th := s.Spawn(1, 0, func(th *Thread) {
		tid = unix.Gettid()
		pinned, _ = h.last()
		close(started)
		for !stop {
			th.Point()
		}
	})
	<-started
	s.CPU(1).IPI(func(*Thread) { handlerTid = unix.Gettid(); stop = true })
	<-th.Done()
	if !slices.Equal(pinned, []int{7}) {
		t.Errorf("thread pinned to %v, want only host CPU 7", pinned)
	}
	if handlerTid != tid {
		t.Errorf("IPI handler ran on OS thread %d, want the target's %d", handlerTid, tid)
	}
}

// Without a Host no thread is pinned.
func TestNotPinnedWithoutHost(t *testing.T) {
	s := NewSystem(2)
	defer s.Stop()
	for i := range s.NumCPU() {
		if h := s.CPU(i).Host; h != -1 {
			t.Errorf("model CPU %d on host CPU %d without a Host", i, h)
		}
	}
}

// Config.Hosts backs each model CPU by the host CPU it names (an index
// into Host.CPUs, modulo its size); CPUs it does not name keep the
// default, the i-th.
func TestConfigHosts(t *testing.T) {
	hosts := []int{0, 2, 5}
	s := New(Config{CPUs: 4, Hosts: []int{0, 1, 1}, Host: newFakeHost(hosts...)})
	defer s.Stop()
	want := []int{hosts[0], hosts[1], hosts[1], hosts[3%len(hosts)]}
	for i, h := range want {
		if got := s.CPU(i).Host; got != h {
			t.Errorf("model CPU %d on host CPU %d, want %d", i, got, h)
		}
	}
}

// With Config.HostPriority a model thread's OS thread takes the host
// priority of its model priority, and SetPrio changes it; without it the
// Host is not asked. A thread that cannot take its priority is left at nice
// 0, and System.HostPriority says so, as it does without a Host.
func TestHostPriority(t *testing.T) {
	for _, c := range []struct {
		on                    bool
		fifoErr               error
		normal, nice, changed string
	}{
		{false, nil, "", "", ""},
		{true, nil, "SCHED_FIFO 1", "nice 15", "SCHED_FIFO 3"},
		{true, unix.EPERM, "nice 0", "nice 15", "nice 0"},
	} {
		h := newFakeHost(0)
		h.fifoErr = c.fifoErr
		s := New(Config{CPUs: 1, HostPriority: c.on, Host: h})
		var normal, nice, changed string
		s.Spawn(0, 0, func(*Thread) { _, normal = h.last() })
		th := s.Spawn(0, 15, func(th *Thread) {
			_, nice = h.last()
			th.SetPrio(-2)
			_, changed = h.last()
		})
		<-th.Done()
		s.Stop()
		if normal != c.normal || nice != c.nice || changed != c.changed {
			t.Errorf("HostPriority %v, SetFIFO error %v: priorities 0, 15 and after SetPrio(-2) took %q, %q, %q; want %q, %q, %q",
				c.on, c.fifoErr, normal, nice, changed, c.normal, c.nice, c.changed)
		}
		if got, want := s.HostPriority(), c.on && c.fifoErr == nil; got != want {
			t.Errorf("HostPriority %v, SetFIFO error %v: System.HostPriority() = %v, want %v", c.on, c.fifoErr, got, want)
		}
	}
	s := New(Config{CPUs: 1, HostPriority: true})
	defer s.Stop()
	if s.HostPriority() {
		t.Error("HostPriority without a Host: System.HostPriority() = true")
	}
}
