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
		s, err := NewModelSpace(env.Machine, v)
		if err != nil {
			return err
		}
		if err := Check(ctx, s, o, experiment.Row{Target: experiment.Model, Variant: name}, env.Progress, emit); err != nil {
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
// open maps file with one of the two walks; its modifier is a goroutine.
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
}

// NewModelSpace maps the pieces in a new model address space on the
// machine d, read with the maps walk v.
func NewModelSpace(d machine.Description, v procfs.Variant) (*ModelSpace, error) {
	m := mm.New(new(mm.Namespace), d.Features) // the space is the run's one object
	for i := range NPieces {
		prot := mm.PROT_READ | mm.PROT_WRITE
		if i%2 == 1 {
			prot = mm.PROT_READ
		}
		if _, err := m.Mmap(nil, base+uint64(i)*PiecePages*page, PiecePages*page, prot, anonFixed, nil, 0); err != nil {
			return nil, err
		}
	}
	f, err := procfs.OpenMaps(m, procfs.Options{Variant: v})
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
	s.f.Rewind()
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

// Start runs the modifier goroutine.
func (s *ModelSpace) Start() error {
	s.stop = make(chan struct{})
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			if s.gap != nil {
				if s.runErr = s.gap.Modify(explore.Modelled{M: s.m}); s.runErr != nil {
					return
				}
				continue
			}
			if s.runErr = s.Modify(); s.runErr != nil {
				return
			}
			if s.runErr = s.Restore(); s.runErr != nil {
				return
			}
		}
	}()
	return nil
}

// Stop stops the modifier goroutine and returns its error.
func (s *ModelSpace) Stop() error {
	close(s.stop)
	s.done.Wait()
	return s.runErr
}

// modelMapper makes the modifications on the model's mm.
type modelMapper struct{ m *mm.MM }

func (o modelMapper) MapAnon(addr, length uint64, prot int) error {
	_, err := o.m.Mmap(nil, addr, length, prot, anonFixed, nil, 0)
	return err
}

func (o modelMapper) Resize(addr, oldLen, newLen uint64) error {
	_, err := o.m.Mremap(nil, addr, oldLen, newLen, 0, 0)
	return err
}

func (o modelMapper) Mprotect(addr, length uint64, prot int) error {
	return o.m.Mprotect(nil, addr, length, prot)
}

// MovePage moves the last page of the VMA at next onto dst, leaving that
// VMA as it is (MREMAP_DONTUNMAP).
func (o modelMapper) MovePage(dst, next uint64) error {
	_, err := o.m.Mremap(nil, next+(PiecePages-1)*page, page, page, mm.MREMAP_MAYMOVE|mm.MREMAP_FIXED|mm.MREMAP_DONTUNMAP, dst)
	return err
}

// BeginGap maps gap layout l at GapBase; the modifier changes it.
func (s *ModelSpace) BeginGap(l *explore.GapLayout) (explore.GapPlan, error) {
	p := l.Place(GapBase, page)
	if err := p.Setup(explore.Modelled{M: s.m}); err != nil {
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
