package mm

import (
	"errors"
	"fmt"
	"testing"

	"mmlab/errno"
	"mmlab/machine"
)

// Machines of the mmap_min_addr tests: this host's kind (vm.mmap_min_addr
// 4096 below CONFIG_LSM_MMAP_MIN_ADDR 65536), with and without
// CAP_SYS_RAWIO; a distribution default (both 65536); and a kernel without
// a minimum at all.
var (
	lowDacRawio   = machine.Features{MmapMinAddr: 4096, LSMMmapMinAddr: 65536, CapSysRawio: true}
	lowDacNoRawio = machine.Features{MmapMinAddr: 4096, LSMMmapMinAddr: 65536}
	distroRawio   = machine.Features{MmapMinAddr: 65536, LSMMmapMinAddr: 65536, CapSysRawio: true}
	distroNoRawio = machine.Features{MmapMinAddr: 65536, LSMMmapMinAddr: 65536}
	noMinAddr     = machine.Features{CapSysRawio: true}
)

func mapAnonAt(m *MM, addr, length uint64, flags int) (uint64, error) {
	return m.Mmap(nil, addr, length, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|flags, nil, 0)
}

// A hint below mmap_min_addr, max(vm.mmap_min_addr,
// CONFIG_LSM_MMAP_MIN_ADDR), is raised to it for every caller, privileged
// or not (do_mmap() → round_hint_to_min()); a hint that truncates to page 0
// is no hint. This host's kernel answered the same for the hints on
// lowDac*: 0x1000 and 0xf000 → 0x10000, 0x800 → placed top-down, as root
// and without CAP_SYS_RAWIO (setpriv --bounding-set=-sys_rawio).
func TestMmapHintRaisedToMinAddr(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f          machine.Features
		hint, want uint64 // want 0: placed top-down below mmap_base
	}{
		{lowDacRawio, 0x1000, 0x10000},
		{lowDacNoRawio, 0x1000, 0x10000},
		{lowDacNoRawio, 0xf000, 0x10000},
		{lowDacNoRawio, 0xf800, 0x10000}, // truncated to 0xf000, raised
		{lowDacRawio, 0x800, 0},          // truncated to 0: no hint
		{lowDacNoRawio, 0x10000, 0x10000},
		{lowDacNoRawio, 0x10800, 0x10000}, // truncated, at the minimum
		{distroRawio, 0x1000, 0x10000},
		{distroNoRawio, 0x1000, 0x10000},
		{noMinAddr, 0x1000, 0x1000},
	} {
		t.Run(fmt.Sprintf("%+v/%#x", c.f, c.hint), func(t *testing.T) {
			m := New(new(Namespace), c.f)
			got, err := mapAnonAt(m, c.hint, pg, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if want == 0 {
				want = DefaultMmapBase - pg
			}
			if got != want {
				t.Errorf("mmap(hint %#x) = %#x; want %#x", c.hint, got, want)
			}
		})
	}
}

// A fixed address below vm.mmap_min_addr (dac_mmap_min_addr) needs
// CAP_SYS_RAWIO, else EPERM (__get_unmapped_area() → security_mmap_addr()
// → cap_mmap_addr()); CONFIG_LSM_MMAP_MIN_ADDR alone does not refuse it
// (only SELinux checks that one, which the model does not model).
// MAP_FIXED_NOREPLACE is MAP_FIXED to the check. This host's kernel
// (lowDac*) answered: fixed and noreplace at 0 succeed as root and fail
// EPERM without CAP_SYS_RAWIO; at 0x1000 and 0x8000 they succeed either way.
func TestMmapFixedBelowMinAddr(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f    machine.Features
		addr uint64
		err  error
	}{
		{lowDacRawio, 0, nil},
		{lowDacNoRawio, 0, errno.EPERM},
		{lowDacRawio, 0x1000, nil},
		{lowDacNoRawio, 0x1000, nil},
		{lowDacNoRawio, 0x8000, nil},
		{distroRawio, 0x1000, nil},
		{distroNoRawio, 0x1000, errno.EPERM},
		{distroNoRawio, 0xf000, errno.EPERM},
		{distroNoRawio, 0x10000, nil},
		{noMinAddr, 0, nil},
		{machine.Features{}, 0, nil}, // no minimum: nothing to check
	} {
		for _, flag := range []int{MAP_FIXED, MAP_FIXED_NOREPLACE} {
			t.Run(fmt.Sprintf("%+v/%#x/%#x", c.f, c.addr, flag), func(t *testing.T) {
				m := New(new(Namespace), c.f)
				got, err := mapAnonAt(m, c.addr, pg, flag)
				if !errors.Is(err, c.err) || err == nil && c.err != nil || err != nil && c.err == nil {
					t.Fatalf("mmap(%#x, fixed) = %#x, %v; want %v", c.addr, got, err, c.err)
				}
				if err == nil && got != c.addr {
					t.Fatalf("mmap(%#x, fixed) = %#x", c.addr, got)
				}
				if err != nil && len(m.VMAs()) != 0 {
					t.Errorf("a refused mapping left VMAs: %v", m.VMAs())
				}
			})
		}
	}
}

// mremap's target goes through get_unmapped_area() with MAP_FIXED
// (vrm_set_new_addr()), after mremap_to() has unmapped it: without
// CAP_SYS_RAWIO a move to page 0 fails EPERM, the source stays, and what
// was at the target is gone. This host's kernel answered the same without
// CAP_SYS_RAWIO (a page at 0x1000 unmapped, 0x20000 kept) and moved it as
// root.
func TestMremapFixedBelowMinAddr(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f   machine.Features
		err error
	}{{lowDacNoRawio, errno.EPERM}, {lowDacRawio, nil}} {
		m := New(new(Namespace), c.f)
		must(t, err2(mapAnonAt(m, 0x1000, pg, MAP_FIXED)))
		must(t, err2(mapAnonAt(m, 0x20000, pg, MAP_FIXED)))
		_, err := m.Mremap(nil, 0x20000, pg, 2*pg, MREMAP_MAYMOVE|MREMAP_FIXED, 0)
		if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Fatalf("%+v: mremap to 0 = %v; want %v", c.f, err, c.err)
		}
		var spans [][2]uint64
		for _, v := range m.VMAs() {
			spans = append(spans, [2]uint64{v.Start, v.End})
		}
		want := [][2]uint64{{0, 2 * pg}}
		if c.err != nil {
			want = [][2]uint64{{0x20000, 0x21000}}
		}
		if fmt.Sprint(spans) != fmt.Sprint(want) {
			t.Errorf("%+v: VMAs %x; want %x", c.f, spans, want)
		}
	}
}

func err2(_ uint64, err error) error { return err }

// The user address space ends at TASK_SIZE, 2^47 - 4096 with 4-level page
// tables and 2^56 - 4096 with 5-level paging (task_size_max()): fixed
// mappings, munmap (do_vmi_munmap()), mremap (check_mremap_params(),
// vma_expandable()) check against it. No host at hand had la57, so these
// rules are pinned from arch/x86 and mm/ (v6.19) alone, without a live
// oracle.
func TestTaskSizeLA57(t *testing.T) {
	t.Parallel()
	const high = 1 << 50
	for _, la57 := range []bool{false, true} {
		f := machine.Features{LA57: la57, MmapMinAddr: 4096, LSMMmapMinAddr: 65536, CapSysRawio: true}
		m := New(new(Namespace), f)
		wantTS := uint64(1<<47 - pg)
		if la57 {
			wantTS = 1<<56 - pg
		}
		if m.TaskSize() != wantTS {
			t.Fatalf("la57 %v: TaskSize %#x; want %#x", la57, m.TaskSize(), wantTS)
		}
		_, err := mapAnonAt(m, high, pg, MAP_FIXED)
		if la57 != (err == nil) {
			t.Errorf("la57 %v: mmap fixed at 2^50: %v", la57, err)
		}
		if !la57 && !errors.Is(err, errno.ENOMEM) {
			t.Errorf("4-level: mmap fixed at 2^50: %v; want ENOMEM", err)
		}
		_, err = mapAnonAt(m, wantTS-pg, pg, MAP_FIXED)
		must(t, err) // the last page below TASK_SIZE
		if _, err := mapAnonAt(m, wantTS, pg, MAP_FIXED); !errors.Is(err, errno.ENOMEM) {
			t.Errorf("la57 %v: mmap at TASK_SIZE: %v; want ENOMEM", la57, err)
		}
		err = m.Munmap(nil, high, pg)
		if la57 != (err == nil) {
			t.Errorf("la57 %v: munmap at 2^50: %v", la57, err)
		}
		// Move the last page to 2^50 + 2 pages: beyond TASK_SIZE without
		// la57 (EINVAL), then grow in place up to TASK_SIZE only.
		must(t, err2(mapAnonAt(m, 0x100000, pg, MAP_FIXED)))
		_, err = m.Mremap(nil, 0x100000, pg, pg, MREMAP_MAYMOVE|MREMAP_FIXED, high+2*pg)
		if la57 != (err == nil) || !la57 && !errors.Is(err, errno.EINVAL) {
			t.Errorf("la57 %v: mremap to 2^50: %v", la57, err)
		}
		if _, err := m.Mremap(nil, wantTS-pg, pg, 2*pg, 0, 0); !errors.Is(err, errno.ENOMEM) {
			t.Errorf("la57 %v: mremap growing past TASK_SIZE: %v; want ENOMEM", la57, err)
		}
	}
}

// Non-fixed placement with 5-level paging stays in the 47-bit
// DEFAULT_MAP_WINDOW unless the hint is above it
// (arch_get_unmapped_area_topdown()): a free hint above it is used as it
// is; a taken one searches below mmap_base plus TASK_SIZE_MAX -
// DEFAULT_MAP_WINDOW, the top of the 56-bit space; a hint whose range
// crosses 2^47 is not used (mmap_address_hint_valid()). With 4-level page
// tables a hint above the window is beyond TASK_SIZE and is ignored. No
// host at hand had la57: pinned from the v6.19 sources alone, without a
// live oracle.
func TestPlacementWindowLA57(t *testing.T) {
	t.Parallel()
	const high = 1 << 50
	topOf56 := uint64(DefaultMmapBase + (1<<56 - pg) - machine.DefaultMapWindow)
	for _, c := range []struct {
		la57       bool
		hint, want uint64
		taken      bool // map the hint first
	}{
		{true, high, high, false},
		{true, high, topOf56 - 2*pg, true},
		{false, high, DefaultMmapBase - 2*pg, false},
		{false, high, DefaultMmapBase - 2*pg, true},
		{true, machine.DefaultMapWindow - pg, DefaultMmapBase - 2*pg, false}, // crosses 2^47 with 2 pages
		{false, machine.DefaultMapWindow - 2*pg, machine.DefaultMapWindow - 2*pg, false},
		{true, machine.DefaultMapWindow - 2*pg, machine.DefaultMapWindow - 2*pg, false},
		{true, 1 << 55, 1 << 55, false},
	} {
		t.Run(fmt.Sprintf("la57=%v/%#x/taken=%v", c.la57, c.hint, c.taken), func(t *testing.T) {
			m := New(new(Namespace), machine.Features{LA57: c.la57, MmapMinAddr: 4096, LSMMmapMinAddr: 65536, CapSysRawio: true})
			if c.taken {
				if _, err := mapAnonAt(m, c.hint, 2*pg, MAP_FIXED); c.la57 && err != nil {
					t.Fatal(err)
				}
			}
			got, err := mapAnonAt(m, c.hint, 2*pg, 0)
			if err != nil || got != c.want {
				t.Errorf("mmap(hint %#x, 2 pages) = %#x, %v; want %#x", c.hint, got, err, c.want)
			}
		})
	}
	// uprobes' XOL area: xol_add_vma() hints TASK_SIZE - PAGE_SIZE, which
	// with la57 lies above the window and is used.
	for _, la57 := range []bool{false, true} {
		m := New(new(Namespace), machine.Features{LA57: la57, MmapMinAddr: 65536, LSMMmapMinAddr: 65536})
		m.MmapWriteLock(nil)
		got, err := m.GetUnmappedArea(m.TaskSize()-pg, pg)
		m.MmapWriteUnlock()
		if err != nil || got != m.TaskSize()-pg {
			t.Errorf("la57 %v: XOL hint: %#x, %v; want %#x", la57, got, err, m.TaskSize()-pg)
		}
	}
}

// When nothing fits below mmap_base, top-down placement falls back to
// bottom-up from mmap_legacy_base (TASK_UNMAPPED_BASE, a third of the
// 47-bit window) up to the window's end (arch_get_unmapped_area()).
func TestPlacementBottomUpFallback(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), lowDacRawio)
	m.MmapBase = 0x30000 // room below it: 0x10000-0x30000, two 64 KiB mappings
	for range 2 {
		if _, err := mapAnonAt(m, 0, 0x10000, 0); err != nil {
			t.Fatal(err)
		}
	}
	got, err := mapAnonAt(m, 0, 0x10000, 0)
	if err != nil || got != mmapLegacyBase {
		t.Fatalf("third mapping at %#x, %v; want the legacy base %#x", got, err, uint64(mmapLegacyBase))
	}
	if mmapLegacyBase != 0x2aaaaaaab000 {
		t.Errorf("mmapLegacyBase %#x; want PAGE_ALIGN((2^47-4096)/3) = 0x2aaaaaaab000", uint64(mmapLegacyBase))
	}
}

// A fork's child keeps its parent's mmap_base (dup_mm() copies the
// mm_struct), so placement goes on alike in both.
func TestForkKeepsMmapBase(t *testing.T) {
	t.Parallel()
	m := New(new(Namespace), lowDacRawio)
	m.MmapBase = 0x40000000
	c, err := m.Fork(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Exit()
	got, err := mapAnonAt(c, 0, pg, 0)
	if err != nil || got != 0x40000000-pg {
		t.Errorf("child's mapping at %#x, %v; want %#x", got, err, 0x40000000-pg)
	}
}
