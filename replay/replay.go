// Package replay runs an mmlab trace (package trace) on the model address
// space (package mm), printing exactly what the live runner
// (mmlab/live/replay) prints for the same trace on the kernel: maps lines of
// the VMAs overlapping the arena, peek lines and error lines.
package replay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"mmlab/errno"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/trace"
)

// Run replays p on a fresh model address space and writes its output to w.
// A fork runs the following ops on a copy of the address space (mm.Fork)
// until the matching exit (or the end of the trace); then the child's address
// space exits and the parent goes on. Run stops early with ctx's error when
// ctx is cancelled. Like the live runner, it first refuses a Program that
// breaks a rule of trace.Parse or does not fit a machine with features f
// (Program.ValidateFor), with the same error.
// The address space is v6.19's (mm.New); RunWith chooses its design.
func Run(ctx context.Context, f machine.Features, p *trace.Program, w io.Writer) error {
	return RunWith(ctx, f, mm.Config{GapFix: mm.GapFixNone}, p, w)
}

// RunWith is Run on an address space of design c (mm.NewWith, which refuses
// an unset c.GapFix). Every design gives the same output: they differ only
// in what concurrent readers see.
func RunWith(ctx context.Context, f machine.Features, c mm.Config, p *trace.Program, w io.Writer) error {
	return runHooked(ctx, f, c, p, w, nil)
}

// runHooked is RunWith with a test hook: after, if set, sees the address
// space after each op.
func runHooked(ctx context.Context, f machine.Features, c mm.Config, p *trace.Program, w io.Writer, after func(m *mm.MM, op *trace.Op)) error {
	if err := p.ValidateFor(f); err != nil {
		return err
	}
	r := &runner{ctx: ctx, p: p, out: bufio.NewWriter(w), files: map[string]*mm.File{}, after: after}
	root, err := mm.NewWith(&r.ns, f, c)
	if err != nil {
		return err
	}
	// Top-down placement (a hint the kernel does not use) starts at the
	// top of trace.ProcessZones' mmap area, as the live helper's lies in
	// it: such a mapping lands outside every arena on both targets. A
	// model choice: the live mmap_base is random within that zone.
	root.MmapBase = trace.StackZoneLo
	_, err = r.run(root, 0)
	root.Exit()
	if ferr := r.out.Flush(); err == nil {
		err = ferr
	}
	return err
}

type runner struct {
	ctx   context.Context
	p     *trace.Program
	out   *bufio.Writer
	files map[string]*mm.File // one open file description per trace file
	buf   []byte
	after func(m *mm.MM, op *trace.Op) // runHooked's test hook, or nil
	ns    mm.Namespace                 // numbers the run's address spaces and files
}

// run executes ops from index i on m until an exit op (returning the index
// after it) or the end of the trace.
func (r *runner) run(m *mm.MM, i int) (int, error) {
	ops := r.p.Ops
	for i < len(ops) {
		if err := r.ctx.Err(); err != nil {
			return i, err
		}
		op := &ops[i]
		switch op.Kind {
		case trace.OpExit:
			return i + 1, nil
		case trace.OpFork:
			child, err := m.Fork(nil)
			if err != nil {
				r.errorLine(op.Line, err)
				return len(ops), nil
			}
			next, err := r.run(child, i+1)
			child.Exit()
			if err != nil {
				return next, err
			}
			i = next
			continue
		default:
			r.step(m, op)
		}
		i++
	}
	return i, nil
}

// step executes one op that is neither fork nor exit.
func (r *runner) step(m *mm.MM, op *trace.Op) {
	var err error
	switch op.Kind {
	case trace.OpFile:
		in := mm.NewInode(&r.ns, op.File, op.Size, trace.FileByte)
		r.files[op.File] = mm.Open(in)
	case trace.OpMmap:
		flags := mm.MAP_PRIVATE
		if op.Shared {
			flags = mm.MAP_SHARED
		}
		if op.Fixed {
			flags |= mm.MAP_FIXED
		}
		if op.NoReplace {
			flags |= mm.MAP_FIXED_NOREPLACE
		}
		if op.Populate {
			flags |= mm.MAP_POPULATE
		}
		var f *mm.File
		if op.File != "" {
			f = r.files[op.File]
			if f == nil {
				err = errno.EBADF
				break
			}
		} else {
			flags |= mm.MAP_ANONYMOUS
		}
		_, err = m.Mmap(nil, op.Addr, op.Len, int(op.Prot), flags, f, op.Off)
	case trace.OpMunmap:
		err = m.Munmap(nil, op.Addr, op.Len)
	case trace.OpMprotect:
		err = m.Mprotect(nil, op.Addr, op.Len, int(op.Prot))
	case trace.OpMremap:
		flags := 0
		if op.MayMove {
			flags = mm.MREMAP_MAYMOVE | mm.MREMAP_FIXED
		}
		_, err = m.Mremap(nil, op.Addr, op.Len, op.NewLen, flags, op.NewAddr)
	case trace.OpTouch:
		_, err = m.LoadByte(nil, op.Addr)
	case trace.OpPeek:
		var v byte
		if v, err = m.LoadByte(nil, op.Addr); err == nil {
			fmt.Fprintln(r.out, trace.PeekLine(op.Addr, v))
		}
	case trace.OpPoke:
		err = m.StoreByte(nil, op.Addr, op.Value)
	case trace.OpExec:
		// The live runner reads the byte through /proc/self/mem first and
		// calls only a ret; an unreadable byte is called all the same, as
		// the fetch then faults.
		if b, rerr := m.ReadRemote(nil, op.Addr); rerr == nil && b != trace.Ret {
			err = errNotRet
			break
		}
		_, err = m.FetchByte(nil, op.Addr)
	case trace.OpWrite:
		_, err = m.CopyFromUser(nil, op.Addr, 1)
	case trace.OpMaps:
		r.buf = procfs.AppendMaps(r.buf[:0], m, nil, r.p.ArenaLo, r.p.ArenaHi)
		r.out.Write(r.buf)
		r.out.WriteByte('\n')
	}
	if err != nil {
		r.errorLine(op.Line, err)
	}
	if r.after != nil {
		r.after(m, op)
	}
}

// errNotRet is the runner's refusal of an exec whose byte is not a ret;
// errorLine prints it as trace.NotRet.
var errNotRet = errors.New(trace.NotRet)

// errorLine prints "error LINE NAME" with the errno's name, or the signal's
// with its si_code.
func (r *runner) errorLine(line int, err error) {
	var e errno.Errno
	var si errno.SigInfo
	name := err.Error()
	switch {
	case errors.As(err, &e):
		name = e.Name()
	case errors.As(err, &si):
		name = si.Error()
	}
	fmt.Fprintln(r.out, trace.ErrorLine(line, name))
}
