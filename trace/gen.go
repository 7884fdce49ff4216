package trace

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
)

// GenOptions sets the shape of a generated trace. Zero fields take the
// family's defaults.
type GenOptions struct {
	Family   string // a Families name; "" is "basic"
	Ops      int    // ops after the file declarations (basic: 40)
	Files    int    // files declared at the start (basic: 2)
	Pages    int    // pages (huge: 256 MiB units) in the window the ops aim at (basic: 48)
	MaxDepth int    // deepest fork nesting (basic: 3)
}

// Family is a kind of generated trace: what it aims at and the shape that
// gets there.
type Family struct {
	Name, Doc string

	opsLo, opsHi           int     // ops, drawn from [opsLo, opsHi]
	files, pages, maxDepth int     // GenOptions defaults
	minDepth               int     // forks are forced until the nesting reaches this
	unit                   uint64  // bytes of one page of the window
	weights                [12]int // of the ops, in the order of op()
	noreplace, populate    int     // percent of mmaps
	crossRemap             bool    // mremap onto and across mappings
	nearTop                bool    // the arena is the window, ending at TASK_SIZE or 2^47
	tinyArena              bool    // the arena is the window, 2 to 8 pages
	edgeFiles              bool    // odd file sizes, offsets near 2^63
	execOnly               bool    // PROT_EXEC-only mappings, rets poked and called
	lowArena               bool    // the arena is the window, from page 0
}

// The op weights, in the order of op(): mmap, munmap, mprotect, mremap,
// touch, poke, peek, fork, exit, maps, exec, write. The families before
// execonly never exec or write, so their traces stay what they were.
var basicWeights = [12]int{24, 8, 10, 10, 8, 12, 12, 5, 5, 6}

// Families are the kinds of trace Generate makes. basic is the everyday mix;
// the others reach what it does not: long traces, deep forks, mremap onto
// and across mappings, files near the 2^63 offset limit, the top of the
// address space, tiny crowded arenas, GiB-sized mappings.
var Families = []Family{
	{Name: "basic", Doc: "40 ops of every kind in a 48-page window, forks 3 deep",
		opsLo: 40, opsHi: 40, files: 2, pages: 48, maxDepth: 3, unit: PageSize, weights: basicWeights, noreplace: 15, populate: 20},
	{Name: "long", Doc: "300 to 600 ops in a 96-page window",
		opsLo: 300, opsHi: 600, files: 3, pages: 96, maxDepth: 3, unit: PageSize, weights: basicWeights, noreplace: 15, populate: 20},
	{Name: "deepfork", Doc: "forks nested 3 to 6 deep, each level writing and remapping",
		opsLo: 60, opsHi: 120, files: 2, pages: 32, maxDepth: 6, minDepth: 3, unit: PageSize,
		weights: [12]int{20, 6, 8, 10, 6, 14, 12, 14, 4, 6}, noreplace: 15, populate: 20},
	{Name: "remap", Doc: "mremap onto, across and out of several mappings, shrinking and growing across VMA boundaries",
		opsLo: 60, opsHi: 120, files: 2, pages: 32, maxDepth: 2, unit: PageSize, crossRemap: true,
		weights: [12]int{22, 4, 6, 36, 4, 10, 10, 2, 2, 4}, noreplace: 15, populate: 20},
	{Name: "fileedge", Doc: "files of odd sizes mapped at offsets within a few pages of 2^63 and past it",
		opsLo: 40, opsHi: 80, files: 3, pages: 32, maxDepth: 2, unit: PageSize, edgeFiles: true,
		weights: [12]int{34, 6, 6, 12, 10, 8, 12, 3, 3, 6}, noreplace: 15, populate: 20},
	{Name: "top", Doc: "an arena of a few pages ending at TASK_SIZE or at 2^47, the page past TASK_SIZE included",
		opsLo: 40, opsHi: 80, files: 2, maxDepth: 2, unit: PageSize, nearTop: true,
		weights: [12]int{24, 8, 8, 20, 8, 10, 10, 3, 3, 6}, noreplace: 25, populate: 20},
	{Name: "tiny", Doc: "an arena of 2 to 8 pages anywhere in the low zone, every op colliding",
		opsLo: 40, opsHi: 80, files: 2, maxDepth: 3, unit: PageSize, tinyArena: true,
		weights: [12]int{30, 8, 8, 14, 6, 10, 10, 4, 4, 6}, noreplace: 50, populate: 20},
	{Name: "huge", Doc: "mappings of 256 MiB to 1 GiB in a 4 GiB window, touched a page at a time",
		opsLo: 40, opsHi: 80, files: 2, pages: 16, maxDepth: 2, unit: 256 << 20,
		weights: [12]int{24, 8, 10, 12, 8, 12, 12, 4, 4, 6}, noreplace: 15},
	{Name: "execonly", Doc: "PROT_EXEC-only mappings (execute-only with protection keys): mprotect into and out of --x, rets poked and called, reads, write(2) from them, forks",
		opsLo: 40, opsHi: 80, files: 2, pages: 16, maxDepth: 2, unit: PageSize, execOnly: true,
		weights: [12]int{20, 4, 16, 4, 8, 10, 10, 4, 4, 4, 10, 8}, noreplace: 15, populate: 20},
	{Name: "low", Doc: "an arena of 32 pages from page 0, mremap onto and across mappings there: a move onto a range reaching below vm.mmap_min_addr fails EPERM without CAP_SYS_RAWIO after the destination was unmapped (mremap_to's failed move); the answers depend on the machine",
		opsLo: 60, opsHi: 120, files: 2, pages: 32, maxDepth: 2, unit: PageSize, crossRemap: true, lowArena: true,
		weights: [12]int{22, 4, 6, 36, 4, 10, 10, 2, 2, 4}, noreplace: 15, populate: 20},
}

// FamilyNamed returns the family called name ("" is basic).
func FamilyNamed(name string) (Family, bool) {
	if name == "" {
		name = "basic"
	}
	for _, f := range Families {
		if f.Name == name {
			return f, true
		}
	}
	return Family{}, false
}

// generator keeps a rough picture of what each process level has mapped, so
// that most ops aim at existing mappings.
type generator struct {
	r      *rand.Rand
	fam    Family
	opt    GenOptions
	base   uint64 // window start
	limit  uint64 // pages from base to the arena's end
	files  []Op
	levels []map[uint64]Prot // page index in the window -> protection, per fork level
	deep   int               // deepest nesting so far
	rets   []uint64          // execonly: where rets were poked, for exec to call
}

// Generate returns a random, valid trace of opt.Family determined by seed
// (PCG from math/rand/v2); it panics on a family not in Families. The basic
// family emits every op and mmap flag: file-backed and anonymous, private
// and shared, populate, all eight protections, mremap shrink, grow and move,
// nested fork/exit, touch, peek and poke, with sizes of a few pages and files
// of a few pages so that offsets past the end of a file happen. Its ops' Line
// fields number the lines of p.String().
func Generate(seed int64, opt GenOptions) *Program {
	fam, ok := FamilyNamed(opt.Family)
	if !ok {
		panic(fmt.Sprintf("trace.Generate: unknown family %q", opt.Family))
	}
	stream := uint64(0x6d6d6c6162)
	if fam.Name != "basic" {
		h := fnv.New64a()
		h.Write([]byte(fam.Name))
		stream ^= h.Sum64()
	}
	g := &generator{r: rand.New(rand.NewPCG(uint64(seed), stream)), fam: fam, levels: []map[uint64]Prot{{}}}
	if opt.Ops <= 0 {
		opt.Ops = fam.opsLo
		if fam.opsHi > fam.opsLo {
			opt.Ops += g.r.IntN(fam.opsHi - fam.opsLo + 1)
		}
	}
	if opt.Files <= 0 {
		opt.Files = fam.files
	}
	if opt.MaxDepth <= 0 {
		opt.MaxDepth = fam.maxDepth
	}
	p := &Program{ArenaLo: DefaultArenaLo, ArenaHi: DefaultArenaHi}
	switch {
	case fam.nearTop:
		p.ArenaHi = MaxUserAddr
		if g.chance(50) {
			p.ArenaHi = taskSize
		}
		p.ArenaLo = taskSize - g.pages(3, 24)*PageSize
	case fam.lowArena:
		p.ArenaLo, p.ArenaHi = 0, uint64(fam.pages)*PageSize
	case fam.tinyArena:
		n := g.pages(2, 8)
		p.ArenaLo = PortableArenaLo
		if !g.chance(10) {
			p.ArenaLo += g.r.Uint64N((ProcessZones[0].Lo-PortableArenaLo)/PageSize-8) * PageSize
		}
		p.ArenaHi = p.ArenaLo + n*PageSize
	}
	g.base = p.ArenaLo
	g.limit = (p.ArenaHi - p.ArenaLo) / fam.unit
	if opt.Pages <= 0 {
		opt.Pages = fam.pages
		if fam.nearTop || fam.tinyArena {
			opt.Pages = int(g.limit)
		}
	}
	g.opt = opt
	for i := range opt.Files {
		f := Op{Kind: OpFile, File: "file" + strconv.Itoa(i), Size: g.fileSize()}
		g.files = append(g.files, f)
		p.Ops = append(p.Ops, f)
	}
	for i := range opt.Ops {
		if fam.minDepth > 0 && g.deep < fam.minDepth && i%6 == 5 && len(g.levels) <= opt.MaxDepth {
			p.Ops = append(p.Ops, g.fork())
			continue
		}
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

// taskSize is TASK_SIZE on x86-64 with 4-level page tables: the last page
// below 2^47 is never mapped.
const taskSize = MaxUserAddr - PageSize

func (g *generator) cur() map[uint64]Prot { return g.levels[len(g.levels)-1] }

func (g *generator) addr(page uint64) uint64 { return g.base + page*g.fam.unit }

func (g *generator) chance(percent int) bool { return g.r.IntN(100) < percent }

// fit cuts n pages from page p to what fits in the arena and in a LEN.
func (g *generator) fit(p, n uint64) uint64 {
	n = min(n, MaxLen/g.fam.unit)
	if p >= g.limit {
		return 0
	}
	return min(n, g.limit-p)
}

// fileSize is a few pages, often with a partial last page; with edgeFiles
// also one byte, a page and one byte, or one byte short of a page.
func (g *generator) fileSize() uint64 {
	if g.fam.edgeFiles && g.chance(50) {
		sizes := []uint64{1, 100, PageSize - 1, PageSize, PageSize + 1, 2*PageSize - 1, 3*PageSize + 1}
		return sizes[g.r.IntN(len(sizes))]
	}
	size := uint64(1+g.r.IntN(3)) * PageSize
	if g.r.IntN(2) == 0 {
		size -= uint64(1 + g.r.IntN(PageSize-1)) // a partial last page
	}
	return size
}

// fileOff is a page offset within the file or a few pages past its end;
// with edgeFiles, half the time one within two pages of the largest offset
// file_mmap_ok() allows for length bytes, or one past 2^63.
func (g *generator) fileOff(f Op, length uint64) uint64 {
	if g.fam.edgeFiles && g.chance(50) {
		const maxLFS = 1<<63 - 1
		switch g.r.IntN(6) {
		case 0:
			return 1 << 63
		case 1:
			return 1<<64 - PageSize
		}
		last := (maxLFS - length) &^ (PageSize - 1) // the largest allowed
		return last + uint64(g.r.IntN(5)-2)*PageSize
	}
	return uint64(g.r.IntN(int(f.Size/PageSize)+3)) * PageSize
}

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

// jitter makes the address of n pages from page p unaligned now and then,
// for EINVAL; ok is false then, and the picture stays as it is. An unaligned
// range is cut by a page where it would end past the arena.
func (g *generator) jitter(p, n uint64) (addr, pages uint64, ok bool) {
	if g.chance(3) {
		if p+n >= g.limit && n > 0 {
			n--
		}
		return g.addr(p) + 0x10, n, false
	}
	return g.addr(p), n, true
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
	total := 0
	for _, w := range g.fam.weights {
		total += w
	}
	for {
		w := g.r.IntN(total)
		k := 0
		for w >= g.fam.weights[k] {
			w -= g.fam.weights[k]
			k++
		}
		switch k {
		case 0:
			return g.mmap()
		case 1:
			p := g.mapped()
			a, n, ok := g.jitter(p, g.fit(p, g.pages(1, 4)))
			if ok {
				g.unmap(p, n)
			}
			return Op{Kind: OpMunmap, Addr: a, Len: n * g.fam.unit}
		case 2:
			p, n, prot := g.mapped(), g.pages(1, 4), g.prot()
			a, n, ok := g.jitter(p, g.fit(p, n))
			for i := range n {
				if ok && hasKey(g.cur(), p+i) {
					g.cur()[p+i] = prot
				}
			}
			return Op{Kind: OpMprotect, Addr: a, Len: n * g.fam.unit, Prot: prot}
		case 3:
			return g.mremap()
		case 4:
			return Op{Kind: OpTouch, Addr: g.access()}
		case 5:
			op := Op{Kind: OpPoke, Addr: g.access(), Value: g.pokeValue()}
			if op.Value == Ret && g.fam.execOnly {
				g.rets = append(g.rets, op.Addr)
			}
			return op
		case 6:
			return Op{Kind: OpPeek, Addr: g.access()}
		case 7:
			if len(g.levels) > g.opt.MaxDepth {
				continue
			}
			return g.fork()
		case 8:
			if len(g.levels) == 1 {
				continue
			}
			g.levels = g.levels[:len(g.levels)-1]
			return Op{Kind: OpExit}
		case 9:
			return Op{Kind: OpMaps}
		case 10:
			if len(g.rets) > 0 && g.chance(60) {
				return Op{Kind: OpExec, Addr: g.rets[g.r.IntN(len(g.rets))]}
			}
			return Op{Kind: OpExec, Addr: g.access()}
		default:
			return Op{Kind: OpWrite, Addr: g.access()}
		}
	}
}

func (g *generator) fork() Op {
	g.levels = append(g.levels, maps.Clone(g.cur()))
	g.deep = max(g.deep, len(g.levels)-1)
	return Op{Kind: OpFork}
}

// prot is rw- four times in ten, else any of the eight protections, so that
// most accesses succeed and every protection still shows up.
func (g *generator) prot() Prot {
	if g.fam.execOnly && g.chance(40) {
		return ProtExec
	}
	if g.chance(40) {
		return ProtRead | ProtWrite
	}
	return Prot(g.r.IntN(8))
}

// access is an address in a mapped page (within its first 4 KiB) eight
// times in ten, else anywhere in the window.
//
// In the execonly family the offset is 0 or 195 half of the time: where
// pokes leave rets (pokeValue) and where a file's first page has one.
func (g *generator) access() uint64 {
	if g.fam.execOnly && g.chance(50) {
		return g.addr(g.mapped()) + uint64(g.r.IntN(2))*Ret
	}
	if g.chance(20) {
		return g.base + uint64(g.r.Int64N(int64(g.opt.Pages)*int64(g.fam.unit)))
	}
	return g.addr(g.mapped()) + uint64(g.r.IntN(PageSize))
}

// pokeValue is any byte, or in the execonly family a ret half of the time.
func (g *generator) pokeValue() byte {
	if g.fam.execOnly && g.chance(50) {
		return Ret
	}
	return byte(g.r.IntN(256))
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
	p, n := min(g.mmapPage(), g.limit-1), g.pages(1, 6)
	if g.chance(2) {
		n = 0 // EINVAL
	}
	a, n, ok := g.jitter(p, g.fit(p, n))
	op := Op{
		Kind:     OpMmap,
		Addr:     a,
		Len:      n * g.fam.unit,
		Prot:     g.prot(),
		Shared:   g.chance(35),
		Populate: g.chance(g.fam.populate),
	}
	if g.chance(100 - g.fam.noreplace) {
		op.Fixed = true
	} else {
		op.NoReplace = true
	}
	if g.chance(40) {
		f := g.files[g.r.IntN(len(g.files))]
		op.File = f.File
		op.Off = g.fileOff(f, op.Len)
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
	if g.fam.crossRemap && g.chance(30) {
		old += g.pages(1, 4) // across the run's end: into a gap or the next VMA
	}
	prot := g.cur()[p]
	a, old, ok := g.jitter(p, g.fit(p, old))
	op := Op{Kind: OpMremap, Addr: a, Len: old * g.fam.unit}
	if !ok || old == 0 {
		op.NewLen = old * g.fam.unit
		return op
	}
	switch n := g.r.IntN(3); {
	case n == 0 && old > 1: // shrink
		nl := g.pages(1, int(old)-1)
		op.NewLen = nl * g.fam.unit
		g.unmap(p+nl, old-nl)
	case n <= 1: // grow in place (ENOMEM when the next pages are taken)
		nl := g.fit(p, old+g.pages(1, 4))
		op.NewLen = nl * g.fam.unit
		free := true
		for i := old; i < nl; i++ {
			free = free && !hasKey(g.cur(), p+i)
		}
		if free {
			g.set(p+old, nl-old, prot)
		}
	default: // move
		to, nl := uint64(g.r.IntN(g.opt.Pages)), g.pages(1, 5)
		if g.fam.crossRemap {
			switch g.r.IntN(4) {
			case 0: // onto a mapping
				to = g.mapped()
			case 1: // across mappings, from just before one
				to = g.mapped() - min(g.mapped(), g.pages(0, 2))
				nl += g.pages(1, 4)
			case 2: // the same size: every VMA of the old range moves
				nl = old
			}
		}
		if g.fam.lowArena && g.chance(20) {
			to, nl = 0, nl+g.pages(1, 3) // from page 0, over what is mapped above it
		}
		nl = g.fit(to, nl)
		if nl == 0 {
			to, nl = 0, 1
		}
		op.MayMove, op.NewAddr, op.NewLen = true, g.addr(to), nl*g.fam.unit
		g.unmap(p, old)
		g.set(to, nl, prot)
	}
	return op
}
