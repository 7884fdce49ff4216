package kernel_test

import (
	"errors"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/locking"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/sched"
)

func TestThreadsShareTheGroup(t *testing.T) {
	t.Parallel()
	var ns kernel.Namespace
	p := kernel.NewTask(&ns, "busy")
	if p.TID != p.TGID() || p.CPU() != -1 {
		t.Fatalf("leader: tid %d tgid %d cpu %d; want tid = tgid, cpu -1", p.TID, p.TGID(), p.CPU())
	}
	p.SetCPU(1)
	th := p.NewThread()
	if th.TGID() != p.TGID() || th.TID == p.TID || th.Group != p.Group || th.CPU() != 1 {
		t.Fatalf("thread: tid %d tgid %d cpu %d; want leader's group %d, a new tid, cpu 1", th.TID, th.TGID(), th.CPU(), p.TGID())
	}
	if got := p.Group.Threads(); len(got) != 2 || got[0] != p || got[1] != th {
		t.Fatalf("threads %v, want [leader thread]", got)
	}
	q := kernel.NewTask(&ns, "other")
	if q.TGID() == p.TGID() || q.TID == th.TID {
		t.Fatalf("second process reuses an id: %d", q.TID)
	}
	if s := th.String(); s != "busy["+strconv.Itoa(th.TID)+"]" {
		t.Fatalf("String %q", s)
	}
}

// SIGKILL takes the whole thread group down, and only it.
func TestKillTakesTheGroupDown(t *testing.T) {
	t.Parallel()
	var ns kernel.Namespace
	p := kernel.NewTask(&ns, "victim")
	th := p.NewThread()
	other := kernel.NewTask(&ns, "bystander")
	if p.Killed() || sched.TryRecv(p.Fatal()) {
		t.Fatal("fresh task already killed")
	}
	th.SendSignal(kernel.SIGKILL)
	for _, k := range []*kernel.Task{p, th} {
		if !k.Killed() || !sched.TryRecv(k.Fatal()) || !k.SignalPending(kernel.SIGKILL) {
			t.Fatalf("%v after SIGKILL to its group: killed %v, fatal closed %v", k, k.Killed(), sched.TryRecv(k.Fatal()))
		}
	}
	if other.Killed() || sched.TryRecv(other.Fatal()) || other.SignalPending(kernel.SIGKILL) {
		t.Fatal("SIGKILL reached another process")
	}
	late := p.NewThread()
	if !late.Killed() || !sched.TryRecv(late.Fatal()) {
		t.Fatal("a thread born into a killed group is not killed")
	}
}

// Kill from many goroutines at once closes Fatal exactly once (a second
// close would panic).
func TestKillConcurrent(t *testing.T) {
	t.Parallel()
	var ns kernel.Namespace
	p := kernel.NewTask(&ns, "victim")
	ths := []*kernel.Task{p, p.NewThread(), p.NewThread()}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ths[i%len(ths)].Kill()
		}()
	}
	wg.Wait()
	for _, k := range ths {
		if !sched.TryRecv(k.Fatal()) {
			t.Fatalf("%v: fatal not closed", k)
		}
	}
}

func TestSignals(t *testing.T) {
	t.Parallel()
	var ns kernel.Namespace
	p := kernel.NewTask(&ns, "faulter")
	th := p.NewThread()
	th.SendSignal(kernel.SIGSEGV)
	if !th.SignalPending(kernel.SIGSEGV) || p.SignalPending(kernel.SIGSEGV) || th.Killed() {
		t.Fatal("SIGSEGV: want pending on the target thread only, not fatal")
	}
	th.SendSignal(kernel.SIGTRAP)
	th.SendSignal(kernel.Signal(10)) // SIGUSR1, not synchronous
	th.SendSignal(kernel.SIGKILL)
	want := []kernel.Signal{kernel.SIGTRAP, 9, 10, kernel.SIGSEGV}
	if got := th.PendingSignals(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pending %v, want %v", got, want)
	}
	// next_signal(): synchronous signals first, lowest number first.
	var order []kernel.Signal
	for {
		sig, ok := th.DequeueSignal()
		if !ok {
			break
		}
		order = append(order, sig)
	}
	want = []kernel.Signal{kernel.SIGTRAP, kernel.SIGSEGV, kernel.SIGKILL, 10}
	if !reflect.DeepEqual(order, want) {
		t.Fatalf("dequeue order %v, want %v", order, want)
	}
	if !th.Killed() {
		t.Fatal("dequeuing SIGKILL revived the task")
	}
	if kernel.SIGBUS.String() != "SIGBUS" || kernel.Signal(10).String() != "signal 10" {
		t.Fatalf("names %q %q", kernel.SIGBUS, kernel.Signal(10))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("signal 65 accepted")
		}
	}()
	th.SendSignal(65)
}

// A task waiting killably on a lock gets EINTR when it is killed, and its
// blocked time is recorded under the lock's name.
func TestTaskOnLocks(t *testing.T) {
	t.Parallel()
	var ns kernel.Namespace
	s := locking.NewRWSem("mmap_lock")
	s.DownWrite(nil)
	tk := kernel.NewTask(&ns, "forker")
	res := make(chan error)
	go func() { res <- s.DownReadKillable(tk) }()
	for s.Waiters() != 1 {
		runtime.Gosched()
	}
	tk.Kill()
	if err := <-res; !errors.Is(err, errno.EINTR) {
		t.Fatalf("killed waiter: %v, want EINTR", err)
	}

	w := kernel.NewTask(&ns, "writer")
	done := make(chan struct{})
	go func() { s.DownRead(w); close(done) }()
	for s.Waiters() != 1 {
		runtime.Gosched()
	}
	s.UpWrite()
	<-done
	s.UpRead()

	for _, k := range []*kernel.Task{tk, w} {
		b := k.Blocked()["mmap_lock"]
		if b.Count != 1 || b.Total <= 0 || b.Max != b.Total || k.BlockedOn("mmap_lock") != b.Total {
			t.Fatalf("%v blocked %+v, want one positive wait", k, b)
		}
	}
	if got := s.Stats().WaitTotal; got != tk.BlockedOn("mmap_lock")+w.BlockedOn("mmap_lock") {
		t.Fatalf("lock's wait total %v is not the sum of the tasks' (%v, %v)", got, tk.BlockedOn("mmap_lock"), w.BlockedOn("mmap_lock"))
	}
	taken := w.TakeBlocked()
	if taken["mmap_lock"].Count != 1 || len(w.Blocked()) != 0 || len(w.TakeBlocked()) != 0 {
		t.Fatalf("TakeBlocked %v, then %v: want the wait, then nothing", taken, w.Blocked())
	}
}

// A task on a model CPU gives the CPU up while it sleeps on a lock: another
// thread of the same CPU runs meanwhile. Were the CPU kept, the second
// thread could never run and the test would hang.
func TestTaskOnModelCPUSleepsThroughBlock(t *testing.T) {
	t.Parallel()
	var ns kernel.Namespace
	sys := sched.NewSystem(1)
	defer sys.Stop()
	s := locking.NewRWSem("mmap_lock")
	s.DownWrite(nil)
	tk := kernel.NewTask(&ns, "sleeper")
	got := make(chan struct{})
	ready := make(chan struct{})
	th := sys.Spawn(0, 0, func(th *sched.Thread) {
		<-ready
		s.DownRead(tk)
		s.UpRead()
		close(got)
	})
	tk.Thread = th
	close(ready)
	for s.Waiters() != 1 {
		runtime.Gosched()
	}
	if tk.CPU() != 0 {
		t.Fatalf("CPU %d, want the thread's 0", tk.CPU())
	}
	ran := make(chan struct{})
	other := sys.Spawn(0, 0, func(*sched.Thread) { close(ran) })
	<-ran // runs only if the sleeper gave up CPU 0
	<-other.Done()
	s.UpWrite()
	<-got
	if b := tk.Blocked()["mmap_lock"]; b.Count != 1 {
		t.Fatalf("blocked %+v, want one wait", b)
	}
}

// Two machines in one process number their tasks, address spaces and
// inodes each from 1, as two booted kernels do (alloc_pid in each one's pid
// namespace, get_next_ino in each): what one makes never moves the other's
// numbers, however their calls interleave.
func TestMachinesNumberIndependently(t *testing.T) {
	t.Parallel()
	type ids struct {
		leader, thread, child int
		mm, childMM           int64
		file, shmem           uint64
	}
	d := machine.MustNamed("x86-64")
	ms := []*kernel.Machine{kernel.NewMachine(d, 1), kernel.NewMachine(d, 1)}
	got := make([]ids, len(ms))
	leaders := make([]*kernel.Task, len(ms))
	// Each step runs on one machine, then the other.
	steps := []func(i int, m *kernel.Machine){
		func(i int, m *kernel.Machine) {
			leaders[i] = m.NewTaskMM("p")
			got[i].leader, got[i].mm = leaders[i].TID, leaders[i].MM.ID
		},
		func(i int, m *kernel.Machine) { got[i].thread = leaders[i].NewThread().TID },
		func(i int, m *kernel.Machine) { got[i].file = mm.NewInode(&m.NS.MM, "/f", 4096, nil).Ino },
		func(i int, m *kernel.Machine) {
			a, err := leaders[i].MM.Mmap(nil, 0, 4096, mm.PROT_READ|mm.PROT_WRITE, mm.MAP_SHARED|mm.MAP_ANONYMOUS, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			got[i].shmem = leaders[i].MM.VMALookup(a).File.Inode.Ino // shmem_zero_setup's inode
		},
		func(i int, m *kernel.Machine) {
			c, err := leaders[i].Fork()
			if err != nil {
				t.Fatal(err)
			}
			got[i].child, got[i].childMM = c.TID, c.MM.ID
		},
	}
	for _, step := range steps {
		for i, m := range ms {
			step(i, m)
		}
	}
	want := ids{leader: 1, thread: 2, child: 3, mm: 1, childMM: 2, file: 1, shmem: 2}
	for i, m := range ms {
		m.Stop()
		if got[i] != want {
			t.Errorf("machine %d numbered %+v, want %+v", i, got[i], want)
		}
	}
}
