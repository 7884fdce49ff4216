package explore

import (
	"fmt"
	"slices"

	"mmlab/binfmt"
	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/mm/pgtable"
	"mmlab/procfs"
	"mmlab/sched"
	"mmlab/uprobes"
)

// text is the scenarios' program, loaded by binfmt. main calls f RCX
// times and main5 calls f5 RCX times; RAX counts the calls that ran the
// function. f starts with a 1-byte nop (an int3 site), f5 with a 5-byte nop
// (an optimizable site on x86-64).
func text(a *cpu.Asm) {
	a.Label("main").Label("loop").Call("f").Dec32(cpu.RCX).Jnz("loop").Hlt()
	a.Label("main5").Label("loop5").Call("f5").Dec32(cpu.RCX).Jnz("loop5").Hlt()
	a.Label("f").Nop().Inc32(cpu.RAX).Ret()
	a.Label("f5").Nop5().Inc32(cpu.RAX).Ret()
}

const (
	swbp     = 0xcc // int3
	callInsn = 0xe8 // call rel32, the optimized site's opcode
)

// site is a probed instruction of the program: its file offset, length
// and the file's bytes there.
type site struct {
	label string
	off   uint64
	len   int
	code  []byte
}

func (w *World) siteOf(label string) site {
	n := 1
	if label == "f5" {
		n = 5
	}
	off := w.Prog.Offset(label)
	return site{label, off, n, w.Prog.Code[off : off+uint64(n)]}
}

// probe makes label the scenario's one probed site, adds the checks of its
// properties that run at every decision, and returns the site.
func (w *World) probe(label string) site {
	s := w.siteOf(label)
	w.sites = []site{s}
	w.stepChecks()
	return s
}

// World is one run's model kernel: the deterministic System, the machine,
// uprobes in the run's design, the probed program and the open file every
// process maps it from, the processes whose mms the registry checks look
// at, and what the tasks observed. Only the running task of the run, or
// Check between two tasks, touches it: no lock.
type World struct {
	Design Design
	Sys    *sched.System
	Mach   *kernel.Machine
	U      *uprobes.Uprobes
	Prog   *binfmt.Program
	File   *mm.File
	// MapsOpened, if set (by a Scenario's setup), is called with each
	// maps file a reader of the run opens, before it reads.
	MapsOpened func(f *procfs.MapsFile)

	sites []site
	// procs are the live processes of the scenario that map the file: the
	// ones it made and the children forks returned, until they exit. A
	// child still being forked is nobody's yet and is not looked at.
	procs []*kernel.Task
	// inflight counts the register and unregister calls under way per
	// site; registering counts registrations, regStarts their starts.
	inflight    map[uint64]int
	registering int
	regStarts   int
	checks      []check
	violation   *Violation // a completion check's failure, reported at the next decision
	final       []sched.ThreadState
	props       []Property // the scenario's: a property it does not name is not checked
}

// check is a property evaluated at every decision: "" while it holds.
type check struct {
	prop Property
	fn   func() string
}

// newWorld builds the model kernel of one run on the machine m; seed-000
// and seed-004 scenarios probe sites, seed 003 only needs the System.
func newWorld(m machine.Description, d Design, props []Property, cfg uprobes.Config, cpus int, choose func(sched.Choice) int, maxSteps int) (*World, error) {
	if err := Designs.Check(d); err != nil {
		return nil, err
	}
	w := &World{Design: d, props: props, inflight: map[uint64]int{}}
	w.Sys = sched.New(sched.Config{CPUs: cpus, Deterministic: true, Choose: choose, Check: w.check, MaxSteps: maxSteps})
	w.Mach = kernel.NewMachineOn(m, w.Sys)
	u, err := uprobes.New(w.Mach, cfg)
	if err != nil {
		return nil, err
	}
	w.U = u
	if w.Prog, err = binfmt.NewProgram(&w.Mach.NS.MM, "/usr/bin/probed", text); err != nil {
		return nil, err
	}
	w.File = mm.Open(w.Prog.File)
	return w, nil
}

// check is the run's sched.Config.Check; a failure keeps the tasks' states.
func (w *World) check() error {
	v := w.violation
	for _, c := range w.checks {
		if v != nil {
			break
		}
		if d := c.fn(); d != "" {
			v = &Violation{Property: c.prop, Detail: d}
		}
	}
	if v == nil {
		return nil
	}
	w.Sys.EachThread(func(t sched.ThreadState) { w.final = append(w.final, t) })
	return v
}

// fail records a violation seen by a task at a completion event; the run
// ends at the next decision. The first one stays.
func (w *World) fail(p Property, format string, args ...any) {
	if w.violation == nil && (p == PropProgress || slices.Contains(w.props, p)) {
		w.violation = &Violation{Property: p, Detail: fmt.Sprintf(format, args...)}
	}
}

// mapsOpened passes f, a maps file a reader of the run just opened, to
// MapsOpened.
func (w *World) mapsOpened(f *procfs.MapsFile) {
	if w.MapsOpened != nil {
		w.MapsOpened(f)
	}
}

// newProc returns a process that maps the program and a stack.
func (w *World) newProc(name string) *kernel.Task {
	t, err := binfmt.Exec(w.U, name, w.File, 1)
	if err != nil {
		panic(err)
	}
	w.procs = append(w.procs, t)
	return t
}

// start runs body as task t on CPU cpu.
func (w *World) start(t *kernel.Task, cpu int, body func(r *kernel.Runner)) *kernel.Runner {
	return w.Mach.Start(t, cpu, 0, body)
}

// task starts body as a task of its own (a tracer, a killer: no mm).
func (w *World) task(name string, cpu int, body func(t *kernel.Task)) *kernel.Task {
	t := w.Mach.NewTask(name)
	w.start(t, cpu, func(*kernel.Runner) { body(t) })
	return t
}

// on starts body on a thread of process p.
func (w *World) on(p *kernel.Task, cpu int, body func()) {
	w.start(p, cpu, func(*kernel.Runner) { body() })
}

// exit ends t's mm (exit_mm) and forgets the process.
func (w *World) exit(t *kernel.Task) {
	w.procs = slices.DeleteFunc(w.procs, func(p *kernel.Task) bool { return p == t })
	t.ExitMM()
}

// busy populates and unmaps anonymous memory in p's mm n times, holding
// its mmap write lock for each (the seed's busy process, in small).
func busy(p *kernel.Task, n int) {
	for range n {
		a, err := p.MM.Mmap(p, 0, 4*pgtable.PageSize, mm.PROT_READ|mm.PROT_WRITE,
			mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_POPULATE, nil, 0)
		if err != nil {
			return
		}
		_ = p.MM.Munmap(p, a, 4*pgtable.PageSize)
	}
}

// siteBytes reads the site's bytes in m as the CPU would see them now,
// without a lock or a fault: the mapped page's, or the file's where no page
// is mapped. ok is false if m does not map the site from the file.
func siteBytes(m *mm.MM, s site) (b [5]byte, ok bool) {
	vaddr := binfmt.Text + s.off
	v := m.VMALookup(vaddr)
	if v == nil || v.File == nil {
		return b, false
	}
	for i := range s.len {
		a := vaddr + uint64(i)
		if x, present := m.PeekByte(a); present {
			b[i] = x
		} else if x, inFile := v.FileByte(a); inFile {
			b[i] = x
		}
	}
	return b, true
}

// probed reports whether site bytes b carry a breakpoint: an int3, or the
// call an optimized site became.
func probed(b [5]byte) bool { return b[0] == swbp || b[0] == callInsn }

// intact reports whether b are the file's bytes of the site.
func intact(b [5]byte, s site) bool {
	for i := range s.len {
		if b[i] != s.code[i] {
			return false
		}
	}
	return true
}

// agreement checks every live process of the scenario against the
// registry at site s: a process a consumer of the uprobe wants has the
// breakpoint, any other has the file's bytes.
func (w *World) agreement(s site) string {
	up := w.U.Lookup(w.Prog.File, s.off)
	for _, p := range w.procs {
		m := p.MM
		if m == nil || m.Users.Load() == 0 {
			continue
		}
		b, ok := siteBytes(m, s)
		if !ok {
			continue
		}
		wanted := up != nil && up.Wants(m)
		switch {
		case wanted && !probed(b):
			return fmt.Sprintf("%s has % x at %s, but a consumer of %v wants it probed", p.Comm, b[:s.len], s.label, up)
		case !wanted && !intact(b, s):
			reg := "no uprobe"
			if up != nil {
				reg = fmt.Sprintf("%v, which no consumer wants there", up)
			}
			return fmt.Sprintf("%s has % x at %s (file: % x), but the registry has %s", p.Comm, b[:s.len], s.label,
				s.code, reg)
		}
	}
	return ""
}

// consumer returns a consumer whose handler does nothing.
func consumer() *uprobes.Consumer {
	return &uprobes.Consumer{Handler: func(*kernel.Runner) int { return 0 }}
}

// register is uprobe_register() by task t on site s, with the agreement
// checked the moment it returns.
func (w *World) register(t *kernel.Task, s site, c *uprobes.Consumer) (*uprobes.Uprobe, error) {
	w.inflight[s.off]++
	w.registering++
	w.regStarts++
	up, err := w.U.Register(t, w.Prog.File, s.off, c)
	w.inflight[s.off]--
	w.registering--
	if err == nil && w.inflight[s.off] == 0 {
		if d := w.agreement(s); d != "" {
			w.fail(PropAgree, "after uprobe_register: %s", d)
		}
	}
	return up, err
}

// unregister is uprobe_unregister_nosync() by task t, with the agreement
// checked the moment it returns: under PropKilledClean if t was killed.
func (w *World) unregister(t *kernel.Task, s site, up *uprobes.Uprobe, c *uprobes.Consumer) error {
	w.inflight[s.off]++
	err := w.U.UnregisterNosync(t, up, c)
	w.inflight[s.off]--
	if w.inflight[s.off] == 0 {
		if d := w.agreement(s); d != "" {
			p := PropAgree
			if t.Killed() {
				p = PropKilledClean
			}
			w.fail(p, "after uprobe_unregister (err %v): %s", err, d)
		}
	}
	return err
}

// registerCycle registers a consumer on s, unregisters it and waits for
// its handlers (uprobe_unregister_sync), n times.
func (w *World) registerCycle(t *kernel.Task, s site, n int) {
	for range n {
		c := consumer()
		up, err := w.register(t, s, c)
		if err != nil {
			return
		}
		if w.unregister(t, s, up, c) != nil {
			return
		}
		w.U.UnregisterSync(t)
	}
}

// fork forks p with h, checks the child against its parent (PropInherit)
// and adds it to the scenario's processes.
func (w *World) fork(p *kernel.Task, h kernel.ForkHooks) (*kernel.Task, error) {
	stable := w.registering == 0
	starts := w.regStarts
	var before [][5]byte
	for _, s := range w.sites {
		b, _ := siteBytes(p.MM, s)
		before = append(before, b)
	}
	c, err := p.ForkWith(h)
	if err != nil {
		return nil, err
	}
	c.Comm = "child of " + p.Comm
	w.procs = append(w.procs, c)
	if !stable || w.regStarts != starts {
		return c, nil // a registration may not have reached the child yet
	}
	for i, s := range w.sites {
		after, _ := siteBytes(p.MM, s)
		up := w.U.Lookup(w.Prog.File, s.off)
		if !probed(before[i]) || !probed(after) || up == nil || !up.Wants(c.MM) {
			continue
		}
		if b, _ := siteBytes(c.MM, s); !probed(b) {
			w.fail(PropInherit, "%s had the breakpoint at %s throughout the fork, %v wants the child, but the child has % x",
				p.Comm, s.label, up, b[:s.len])
		}
	}
	return c, nil
}

// gate is a one-shot event a task waits for (a completion).
type gate chan struct{}

func newGate() gate          { return make(gate) }
func (g gate) open()         { sched.Close(g) }
func (g gate) wait(n string) { sched.Wait(nil, n, g, nil) }
func (g gate) opened() bool  { return sched.TryRecv(g) }
