package trace

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
)

// GenOptions sets the shape of a generated trace. Zero fields take the
// defaults given.
type GenOptions struct {
	Ops      int // ops after the file declarations (default 40)
	Files    int // files declared at the start (default 2)
	Pages    int // pages in the window the ops aim at (default 48)
	MaxDepth int // deepest fork nesting (default 3)
}

// generator keeps a rough picture of what each process level has mapped, so
// that most ops aim at existing mappings.
type generator struct {
	r      *rand.Rand
	opt    GenOptions
	base   uint64
	files  []Op
	levels []map[uint64]Prot // page index in the window -> protection, per fork level
}

// Generate returns a random, valid trace determined by seed (PCG from
// math/rand/v2). It emits every op and mmap flag: file-backed and anonymous,
// private and shared, populate, all eight protections, mremap shrink, grow
// and move, nested fork/exit, touch, peek and poke, with sizes of a few pages
// and files of a few pages so that offsets past the end of a file happen. Its
// ops' Line fields number the lines of p.String().
func Generate(seed int64, opt GenOptions) *Program {
	if opt.Ops <= 0 {
		opt.Ops = 40
	}
	if opt.Files <= 0 {
		opt.Files = 2
	}
	if opt.Pages <= 0 {
		opt.Pages = 48
	}
	if opt.MaxDepth <= 0 {
		opt.MaxDepth = 3
	}
	g := &generator{
		r:      rand.New(rand.NewPCG(uint64(seed), 0x6d6d6c6162)),
		opt:    opt,
		base:   DefaultArenaLo,
		levels: []map[uint64]Prot{{}},
	}
	p := &Program{ArenaLo: DefaultArenaLo, ArenaHi: DefaultArenaHi}
	for i := range opt.Files {
		size := uint64(1+g.r.IntN(3)) * PageSize
		if g.r.IntN(2) == 0 {
			size -= uint64(1 + g.r.IntN(PageSize-1)) // a partial last page
		}
		f := Op{Kind: OpFile, File: "file" + strconv.Itoa(i), Size: size}
		g.files = append(g.files, f)
		p.Ops = append(p.Ops, f)
	}
	for range opt.Ops {
		p.Ops = append(p.Ops, g.op())
	}
	if p.Ops[len(p.Ops)-1].Kind != OpMaps {
		p.Ops = append(p.Ops, Op{Kind: OpMaps})
	}
	for i := range p.Ops {
		p.Ops[i].Line = i + 2 // line 1 is the arena
	}
	return p
}

func (g *generator) cur() map[uint64]Prot { return g.levels[len(g.levels)-1] }

func (g *generator) addr(page uint64) uint64 { return g.base + page*PageSize }

func (g *generator) chance(percent int) bool { return g.r.IntN(100) < percent }

// mapped returns a random mapped page, or a random page when nothing is.
func (g *generator) mapped() uint64 {
	m := g.cur()
	if len(m) == 0 {
		return uint64(g.r.IntN(g.opt.Pages))
	}
	keys := slices.Sorted(maps.Keys(m))
	return keys[g.r.IntN(len(keys))]
}

// mmapPage picks where a new mapping starts: right after or right before an
// existing one (to merge), on one (to replace it or fail EEXIST), or anywhere.
func (g *generator) mmapPage() uint64 {
	m := g.cur()
	p := g.mapped()
	switch n := g.r.IntN(10); {
	case len(m) == 0 || n < 2:
		return uint64(g.r.IntN(g.opt.Pages))
	case n < 6:
		for hasKey(m, p+1) {
			p++
		}
		return p + 1
	case n < 8:
		for p > 0 && hasKey(m, p-1) {
			p--
		}
		if p == 0 {
			return 0
		}
		return p - 1
	default:
		return p
	}
}

func hasKey(m map[uint64]Prot, k uint64) bool { _, ok := m[k]; return ok }

// jitter makes an address unaligned now and then, for EINVAL; ok is false
// then, and the picture stays as it is.
func (g *generator) jitter(a uint64) (addr uint64, ok bool) {
	if g.chance(3) {
		return a + 0x10, false
	}
	return a, true
}

// run is the number of mapped pages from page p on, at most max.
func (g *generator) run(p, max uint64) uint64 {
	n := uint64(0)
	for n < max && hasKey(g.cur(), p+n) {
		n++
	}
	return n
}

func (g *generator) pages(lo, hi int) uint64 { return uint64(lo + g.r.IntN(hi-lo+1)) }

func (g *generator) op() Op {
	for {
		w := g.r.IntN(100)
		switch {
		case w < 24:
			return g.mmap()
		case w < 32:
			p, n := g.mapped(), g.pages(1, 4)
			a, ok := g.jitter(g.addr(p))
			if ok {
				g.unmap(p, n)
			}
			return Op{Kind: OpMunmap, Addr: a, Len: n * PageSize}
		case w < 42:
			p, n, prot := g.mapped(), g.pages(1, 4), g.prot()
			a, ok := g.jitter(g.addr(p))
			for i := range n {
				if ok && hasKey(g.cur(), p+i) {
					g.cur()[p+i] = prot
				}
			}
			return Op{Kind: OpMprotect, Addr: a, Len: n * PageSize, Prot: prot}
		case w < 52:
			return g.mremap()
		case w < 60:
			return Op{Kind: OpTouch, Addr: g.access()}
		case w < 72:
			return Op{Kind: OpPoke, Addr: g.access(), Value: byte(g.r.IntN(256))}
		case w < 84:
			return Op{Kind: OpPeek, Addr: g.access()}
		case w < 89:
			if len(g.levels) > g.opt.MaxDepth {
				continue
			}
			g.levels = append(g.levels, maps.Clone(g.cur()))
			return Op{Kind: OpFork}
		case w < 94:
			if len(g.levels) == 1 {
				continue
			}
			g.levels = g.levels[:len(g.levels)-1]
			return Op{Kind: OpExit}
		default:
			return Op{Kind: OpMaps}
		}
	}
}

// prot is rw- four times in ten, else any of the eight protections, so that
// most accesses succeed and every protection still shows up.
func (g *generator) prot() Prot {
	if g.chance(40) {
		return ProtRead | ProtWrite
	}
	return Prot(g.r.IntN(8))
}

func (g *generator) access() uint64 {
	if g.chance(20) {
		return g.base + uint64(g.r.IntN(g.opt.Pages*PageSize))
	}
	return g.addr(g.mapped()) + uint64(g.r.IntN(PageSize))
}

func (g *generator) unmap(p, n uint64) {
	for i := range n {
		delete(g.cur(), p+i)
	}
}

func (g *generator) set(p, n uint64, prot Prot) {
	for i := range n {
		g.cur()[p+i] = prot
	}
}

func (g *generator) mmap() Op {
	p, n := g.mmapPage(), g.pages(1, 6)
	if g.chance(2) {
		n = 0 // EINVAL
	}
	a, ok := g.jitter(g.addr(p))
	op := Op{
		Kind:     OpMmap,
		Addr:     a,
		Len:      n * PageSize,
		Prot:     g.prot(),
		Shared:   g.chance(35),
		Populate: g.chance(20),
	}
	if g.chance(85) {
		op.Fixed = true
	} else {
		op.NoReplace = true
	}
	if g.chance(40) {
		f := g.files[g.r.IntN(len(g.files))]
		op.File = f.File
		op.Off = uint64(g.r.IntN(int(f.Size/PageSize)+3)) * PageSize
	}
	free := true
	for i := range n {
		free = free && !hasKey(g.cur(), p+i)
	}
	if ok && (op.Fixed || free) {
		g.set(p, n, op.Prot)
	}
	return op
}

func (g *generator) mremap() Op {
	// Mostly within one run of mapped pages (else EFAULT).
	p, old := g.mapped(), g.pages(1, 4)
	if r := g.run(p, old); r > 0 && g.chance(85) {
		old = r
	}
	prot := g.cur()[p]
	a, ok := g.jitter(g.addr(p))
	op := Op{Kind: OpMremap, Addr: a, Len: old * PageSize}
	if !ok {
		op.NewLen = old * PageSize
		return op
	}
	switch n := g.r.IntN(3); {
	case n == 0 && old > 1: // shrink
		nl := g.pages(1, int(old)-1)
		op.NewLen = nl * PageSize
		g.unmap(p+nl, old-nl)
	case n <= 1: // grow in place (ENOMEM when the next pages are taken)
		nl := old + g.pages(1, 4)
		op.NewLen = nl * PageSize
		free := true
		for i := old; i < nl; i++ {
			free = free && !hasKey(g.cur(), p+i)
		}
		if free {
			g.set(p+old, nl-old, prot)
		}
	default: // move
		to, nl := uint64(g.r.IntN(g.opt.Pages)), g.pages(1, 5)
		op.MayMove, op.NewAddr, op.NewLen = true, g.addr(to), nl*PageSize
		g.unmap(p, old)
		g.set(to, nl, prot)
	}
	return op
}
