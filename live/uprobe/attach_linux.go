package uprobe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"mmlab/live"
	"mmlab/live/tracefs"
	"mmlab/uapi"
)

// Probes are uprobes attached by Attach: one BPF program that counts its
// runs in a per-CPU array, and the links that run it. A Probes is used by one
// goroutine, except Hits, which may be called at any time before Close.
type Probes struct {
	spec     Spec
	hits     *ebpf.Map
	prog     *ebpf.Program
	links    []link.Link
	linkTime time.Duration
}

var memlockOnce sync.Once

// Attach loads the counting program and attaches it at every offset of s as
// s.Mode says. On error nothing stays attached or loaded. The caller must
// Close the result (the objects are file descriptors, so process exit also
// detaches everything). ctx is checked between the probes of uapi.AttachPerf.
func Attach(ctx context.Context, s Spec) (*Probes, error) {
	if s.Path == "" {
		return nil, errors.New("attach uprobes: empty path")
	}
	if len(s.Offsets) == 0 {
		return nil, errors.New("attach uprobes: no offsets")
	}
	for _, off := range s.Offsets {
		if off == 0 {
			// cilium/ebpf reads a zero address as "look up the symbol".
			return nil, fmt.Errorf("attach uprobes on %s: offset 0 is not a probe site", s.Path)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	memlockOnce.Do(func() { _ = rlimit.RemoveMemlock() })

	p := &Probes{spec: s}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	var err error
	p.hits, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "mmlab_hits",
		Type:       ebpf.PerCPUArray,
		KeySize:    4,
		ValueSize:  8,
		MaxEntries: 1,
	})
	if err != nil {
		return nil, withErrno("create BPF per-CPU array", err)
	}
	ps := &ebpf.ProgramSpec{
		Name:         "mmlab_count",
		Type:         ebpf.Kprobe,
		License:      "Dual MIT/GPL",
		Instructions: countInsns(p.hits.FD()),
	}
	if s.Mode == uapi.AttachMulti {
		ps.AttachType = ebpf.AttachTraceUprobeMulti
	}
	p.prog, err = ebpf.NewProgram(ps)
	if err != nil {
		return nil, withErrno("load BPF counting program", err)
	}
	ex, err := link.OpenExecutable(s.Path)
	if err != nil {
		return nil, withErrno("attach uprobes", err)
	}

	start := time.Now()
	switch s.Mode {
	case uapi.AttachMulti:
		opts := &link.UprobeMultiOptions{Addresses: s.Offsets, PID: uint32(s.Pid)}
		var l link.Link
		if s.Ret {
			l, err = ex.UretprobeMulti(nil, p.prog, opts)
		} else {
			l, err = ex.UprobeMulti(nil, p.prog, opts)
		}
		if err != nil {
			return nil, multiError(s, err)
		}
		p.links = append(p.links, l)
	case uapi.AttachPerf:
		for _, off := range s.Offsets {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			opts := &link.UprobeOptions{Address: off, PID: s.Pid, TraceFSPrefix: tracefs.UprobeGroup()}
			var l link.Link
			if s.Ret {
				l, err = ex.Uretprobe("", p.prog, opts)
			} else {
				l, err = ex.Uprobe("", p.prog, opts)
			}
			if err != nil {
				return nil, withErrno(fmt.Sprintf("perf-event %s on %s at %#x", probeKind(s.Ret), s.Path, off), err)
			}
			p.links = append(p.links, l)
		}
	default:
		return nil, fmt.Errorf("attach uprobes: unknown mode %q", s.Mode)
	}
	p.linkTime = time.Since(start)
	ok = true
	return p, nil
}

func probeKind(ret bool) string {
	if ret {
		return "uretprobe"
	}
	return "uprobe"
}

// multiError explains a failed uprobe_multi link, naming the errno and, when
// the kernel lacks the link type, what it lacks.
func multiError(s Spec, err error) error {
	what := fmt.Sprintf("uprobe_multi link (%s at %d offsets) on %s", probeKind(s.Ret), len(s.Offsets), s.Path)
	if s.Pid != 0 && errors.Is(err, os.ErrNotExist) {
		// cilium/ebpf turns the kernel's ESRCH into os.ErrNotExist.
		return fmt.Errorf("%s: ESRCH: no process %d: %w", what, s.Pid, syscall.ESRCH)
	}
	if errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("%s: %w (%w)", what, live.UnsupportedSince("6.6", "kernel lacks BPF uprobe_multi links (CONFIG_UPROBES and CONFIG_BPF_EVENTS)"), err)
	}
	return withErrno(what, err)
}

// countInsns is the BPF program: hits[0] += 1 in the per-CPU array whose fd
// is mapFD, then return 0. It is the kernel bench's trigger_bench.c counter,
// written with cilium/ebpf's assembler.
func countInsns(mapFD int) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.RFP, -4, 0, asm.Word), // key = 0
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}

// Spec returns what was attached.
func (p *Probes) Spec() Spec { return p.spec }

// LinkTime is how long creating the links took: the kernel's uprobe
// registration, without loading the program.
func (p *Probes) LinkTime() time.Duration { return p.linkTime }

// Hits returns how many times the program has run, summed over CPUs.
func (p *Probes) Hits() (uint64, error) {
	var per []uint64
	if err := p.hits.Lookup(uint32(0), &per); err != nil {
		return 0, withErrno("read BPF hit counter", err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// Close detaches every probe, in attach order, then unloads the program and
// its map. Detaching a uprobe waits for the kernel's uprobe_unregister_sync
// (an RCU Tasks Trace grace period), once per link. Close is idempotent.
func (p *Probes) Close() error {
	var errs []error
	for _, l := range p.links {
		if err := l.Close(); err != nil {
			errs = append(errs, withErrno("detach uprobe", err))
		}
	}
	p.links = nil
	if p.prog != nil {
		errs = append(errs, p.prog.Close())
		p.prog = nil
	}
	if p.hits != nil {
		errs = append(errs, p.hits.Close())
		p.hits = nil
	}
	return errors.Join(errs...)
}

// Supported reports why live uprobes cannot be used here, or nil: they need
// Linux, root and the x86-64 targets.
func Supported() error {
	if !haveTargets {
		return fmt.Errorf("live uprobes: %w", live.Unsupported("no probe targets for %s", runtime.GOARCH))
	}
	if !live.IsRoot() {
		return fmt.Errorf("live uprobes: %w", live.Unsupported("needs root (BPF programs and uprobe PMU events)"))
	}
	return nil
}
