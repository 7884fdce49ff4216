package maptear

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"mmlab/errno"
	"mmlab/experiment"
	"mmlab/explore"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/sched"
	"mmlab/uapi"
)

// Model runs the check on the model, once per variant of env: the cases of
// o on an address space read with that maps walk.
func Model(ctx context.Context, o *Options, env experiment.Env, emit func(Result)) error {
	if o.File != "maps" {
		return fmt.Errorf("maptear: the model has no %s file, only maps", o.File)
	}
	for _, name := range env.Variants {
		v, err := procfs.Variants.Parse(name)
		if err != nil {
			return err
		}
		if env.Sim != nil {
			if err := runSim(ctx, o, env, v, env.Row(name), emit); err != nil {
				return err
			}
			continue
		}
		s, err := NewModelSpace(env.Machine, v)
		if err != nil {
			return err
		}
		if err := Check(ctx, s, o, env.Row(name), env.Progress, emit); err != nil {
			return err
		}
	}
	return nil
}

// The model's layout: the pieces at base.
const (
	page = 4096
	base = 0x200000000
)

// ModelSpace is a model address space holding the pieces, read through one
// open maps file with one of the two walks; its modifier is a goroutine, or
// on a simulated machine a task on a CPU of its own (simSpace).
type ModelSpace struct {
	m   *mm.MM
	f   *procfs.MapsFile
	mod Mod
	ops modelMapper

	stop   chan struct{} // closed by Stop
	done   sync.WaitGroup
	runErr error  // the modifier's, written before done
	before []byte // the end of the first chunk of the last observation

	gap  *explore.GapPlan // the gap layout BeginGap mapped, until EndGap
	text []byte           // ReadText's

	sim *simSpace // on a simulated machine; nil in real time
}

// NewModelSpace maps the pieces in a new model address space on the
// machine d, read with the maps walk v.
func NewModelSpace(d machine.Description, v procfs.Variant) (*ModelSpace, error) {
	return newModelSpace(new(mm.Namespace), d, procfs.Options{Variant: v}) // the space is the run's one object
}

// newModelSpace maps the pieces in a new model address space of ns on the
// machine d, read through a maps file opened with opt.
func newModelSpace(ns *mm.Namespace, d machine.Description, opt procfs.Options) (*ModelSpace, error) {
	m := mm.New(ns, d.Features)
	for i := range NPieces {
		prot := mm.PROT_READ | mm.PROT_WRITE
		if i%2 == 1 {
			prot = mm.PROT_READ
		}
		if _, err := m.Mmap(nil, base+uint64(i)*PiecePages*page, PiecePages*page, prot, anonFixed, nil, 0); err != nil {
			return nil, err
		}
	}
	f, err := procfs.OpenMaps(m, opt)
	if err != nil {
		return nil, err
	}
	return &ModelSpace{m: m, f: f, ops: modelMapper{m: m}}, nil
}

const anonFixed = mm.MAP_PRIVATE | mm.MAP_ANONYMOUS | mm.MAP_FIXED

// MapsFile returns the open maps file the space is read through.
func (s *ModelSpace) MapsFile() *procfs.MapsFile { return s.f }

// Pieces returns the pieces' range and the model's page size.
func (s *ModelSpace) Pieces() (Span, uint64) {
	return Span{Start: base, End: base + NPieces*PiecePages*page}, page
}

// Observe reads the last line of the first chunk and the first line of the
// second: the model's pieces start in the first chunk.
func (s *ModelSpace) Observe() (Boundary, error) {
	var b Boundary
	s.syscall() // lseek
	s.f.Rewind()
	s.syscall()
	c, err := s.f.Read()
	if err != nil {
		return b, err
	}
	if len(c) == 0 {
		return b, errors.New("empty maps")
	}
	s.before = append(s.before[:0], LastLines(c, BoundaryLines)...)
	b.Before = s.before
	c = c[:len(c)-1]
	if b.Last, err = lineSpan(c[bytes.LastIndexByte(c, '\n')+1:]); err != nil {
		return b, err
	}
	s.syscall()
	if c, err = s.f.Read(); err != nil {
		return b, err
	}
	if len(c) == 0 {
		return b, errors.New("maps ends at the first chunk")
	}
	b.After = FirstLines(c, BoundaryLines)
	b.First, err = lineSpan(c[:bytes.IndexByte(c, '\n')])
	return b, err
}

func lineSpan(line []byte) (Span, error) {
	var v uapi.VMA
	if err := uapi.ParseLine(line, &v); err != nil {
		return Span{}, err
	}
	return SpanOf(&v), nil
}

// Query asks the model's PROCMAP_QUERY.
func (s *ModelSpace) Query(addr uint64) (Span, bool, error) {
	q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: addr}
	s.syscall()
	err := s.f.Query(&q, nil, nil)
	if errors.Is(err, errno.ENOENT) {
		return Span{}, false, nil
	}
	if err != nil {
		return Span{}, false, err
	}
	return Span{Start: q.VMAStart, End: q.VMAEnd, Perm: uapi.Perm(q.VMAFlags)}, true, nil
}

// Begin chooses c.
func (s *ModelSpace) Begin(c Mod) error {
	s.mod = c
	return nil
}

func (s *ModelSpace) Modify() error  { return s.mod.Modify(s.ops) }
func (s *ModelSpace) Restore() error { return s.mod.Restore(s.ops) }

// Start runs the modifier: a goroutine, or on a simulated machine a task
// on a CPU of its own (simSpace).
func (s *ModelSpace) Start() error {
	if s.sim != nil {
		s.sim.start(s)
		return nil
	}
	s.stop = make(chan struct{})
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		s.runErr = s.modifyUntil(func() bool {
			select {
			case <-s.stop:
				return true
			default:
				return false
			}
		})
	}()
	return nil
}

// modifyUntil is the modifier's loop: modify and restore (or change the
// gap layout) back to back until stopped reports true or a call fails.
func (s *ModelSpace) modifyUntil(stopped func() bool) error {
	for !stopped() {
		if s.sim != nil {
			sched.ChargeUser(s.sim.loop)
		}
		if s.gap != nil {
			if err := s.gap.Modify(s.gapMapper()); err != nil {
				return err
			}
			continue
		}
		if err := s.Modify(); err != nil {
			return err
		}
		if err := s.Restore(); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops the modifier and returns its error.
func (s *ModelSpace) Stop() error {
	if s.sim != nil {
		return s.sim.stop()
	}
	close(s.stop)
	s.done.Wait()
	return s.runErr
}

// syscall is the entry and exit of a system call of the reader's or the
// modifier's, charged on a simulated machine.
func (s *ModelSpace) syscall() {
	if s.sim != nil {
		sched.ChargeCost(sched.CostSyscall, 1)
	}
}

// modelMapper makes the modifications on the model's mm; each is a system
// call, which call, if set, charges first (a simulated machine's).
type modelMapper struct {
	m    *mm.MM
	call func()
}

func (o modelMapper) enter() {
	if o.call != nil {
		o.call()
	}
}

func (o modelMapper) MapAnon(addr, length uint64, prot int) error {
	o.enter()
	_, err := o.m.Mmap(nil, addr, length, prot, anonFixed, nil, 0)
	return err
}

func (o modelMapper) Resize(addr, oldLen, newLen uint64) error {
	o.enter()
	_, err := o.m.Mremap(nil, addr, oldLen, newLen, 0, 0)
	return err
}

func (o modelMapper) Mprotect(addr, length uint64, prot int) error {
	o.enter()
	return o.m.Mprotect(nil, addr, length, prot)
}

// MovePage moves the last page of the VMA at next onto dst, leaving that
// VMA as it is (MREMAP_DONTUNMAP).
func (o modelMapper) MovePage(dst, next uint64) error {
	o.enter()
	_, err := o.m.Mremap(nil, next+(PiecePages-1)*page, page, page, mm.MREMAP_MAYMOVE|mm.MREMAP_FIXED|mm.MREMAP_DONTUNMAP, dst)
	return err
}

// gapMapper is the mapper of the gap layouts: explore.Modelled, whose
// calls a simulated machine charges as modelMapper's.
func (s *ModelSpace) gapMapper() explore.GapMapper {
	if s.sim != nil {
		return simGapMapper{explore.Modelled{M: s.m}, s.ops.call}
	}
	return explore.Modelled{M: s.m}
}

// BeginGap maps gap layout l at GapBase; the modifier changes it.
func (s *ModelSpace) BeginGap(l *explore.GapLayout) (explore.GapPlan, error) {
	p := l.Place(GapBase, page)
	if err := p.Setup(s.gapMapper()); err != nil {
		return p, err
	}
	s.gap = &p
	return p, nil
}

// ReadText reads the whole maps text, chunk by chunk.
func (s *ModelSpace) ReadText() ([]byte, error) {
	var err error
	s.text, err = s.f.ReadAll(s.text[:0])
	return s.text, err
}

// EndGap unmaps the gap layout.
func (s *ModelSpace) EndGap() error {
	lo, hi := s.gap.Span()
	s.gap = nil
	return s.m.Munmap(nil, lo, hi-lo)
}
