package uprobe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"mmlab/uapi"
)

func needLive(t *testing.T) {
	t.Helper()
	if err := Supported(); err != nil {
		t.Skip(err)
	}
}

func target(t *testing.T, name string) Target {
	t.Helper()
	tg, err := LookupTarget(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// memByte reads the byte at pc in this process's memory: 0xCC while a
// uprobe's breakpoint is installed there.
func memByte(t *testing.T, pc uintptr) byte {
	t.Helper()
	b := make([]byte, 1)
	if err := readAt("/proc/self/mem", b, int64(pc)); err != nil {
		t.Fatal(err)
	}
	return b[0]
}

// probeFDs counts this process's descriptors of BPF links and programs and
// perf events: what an attached probe holds.
func probeFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue
		}
		if strings.Contains(l, "bpf-link") || strings.Contains(l, "bpf-prog") || strings.Contains(l, "bpf-map") || strings.Contains(l, "perf_event") {
			n++
		}
	}
	return n
}

// linkTypes returns the link_type line of each of p's BPF links'
// /proc/self/fdinfo (kernel/bpf/syscall.c:bpf_link_show_fdinfo).
func linkTypes(t *testing.T, p *Probes) []string {
	t.Helper()
	var types []string
	for _, l := range p.links {
		fd, ok := l.(interface{ FD() int })
		if !ok {
			t.Fatalf("link %T has no fd", l)
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd.FD()))
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(string(info), "link_type:\t")
		lt, _, _ := strings.Cut(rest, "\n")
		types = append(types, lt)
	}
	return types
}

func TestTargetsResolve(t *testing.T) {
	if !haveTargets {
		t.Skip("no probe targets on this architecture")
	}
	ts, err := Targets()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range targetSpecs {
		tg := ts[s.name]
		if tg.Offset == 0 || tg.Path == "" {
			t.Errorf("%s: %+v", s.name, tg)
		}
		if got := memByte(t, tg.PC); got != s.code[0] {
			t.Errorf("%s: memory at %#x holds %#x, want %#x", s.name, tg.PC, got, s.code[0])
		}
	}
	if ts["sled"].Offset-ts["nop"].Offset != uint64(ts["sled"].PC-ts["nop"].PC) {
		t.Errorf("file offsets and addresses disagree: %+v %+v", ts["nop"], ts["sled"])
	}
}

func TestCheckRejectsWrongTarget(t *testing.T) {
	if !haveTargets {
		t.Skip("no probe targets on this architecture")
	}
	ret := target(t, "ret")
	// The ret target checked as if it were the nop one.
	wrong := ret
	wrong.Code = []byte{0x90, 0xc3}
	if err := checkTarget(wrong); err == nil || !strings.Contains(err.Error(), "want 90 c3") {
		t.Errorf("checkTarget(ret as nop) = %v, want a mismatch error", err)
	}
	// A nop at an offset that is not where the address came from: the sled's
	// first nop looked for at the nop target's offset.
	nop := target(t, "nop")
	moved := target(t, "sled")
	moved.Code = []byte{0x90}
	moved.Offset = nop.Offset
	if err := checkTarget(moved); err == nil || !strings.Contains(err.Error(), "does not match memory") {
		t.Errorf("checkTarget(sled at the nop's offset) = %v, want a memory mismatch", err)
	}
}

func TestAttachDetachLeavesNothing(t *testing.T) {
	needLive(t)
	sled := target(t, "sled")
	for _, mode := range []string{uapi.AttachMulti, uapi.AttachPerf} {
		for _, ret := range []bool{false, true} {
			t.Run(mode+"/"+probeKind(ret), func(t *testing.T) {
				before := probeFDs(t)
				offs := []uint64{sled.Offset, sled.Offset + 1, sled.Offset + 63}
				p, err := Attach(context.Background(), Spec{Path: sled.Path, Offsets: offs, Mode: mode, Ret: ret})
				if err != nil {
					t.Fatal(err)
				}
				for _, i := range []uintptr{0, 1, 63} {
					if b := memByte(t, sled.PC+i); b != 0xcc {
						t.Errorf("sled+%d holds %#x while attached, want the breakpoint 0xcc", i, b)
					}
				}
				if b := memByte(t, sled.PC+2); b != 0x90 {
					t.Errorf("unprobed sled+2 holds %#x, want 0x90", b)
				}
				if got := probeFDs(t); got <= before {
					t.Errorf("probe fds while attached: %d, before %d", got, before)
				}
				// The mode is the link's type as the kernel names it
				// (bpf_link_show_fdinfo names a uretprobe's uprobe_multi
				// link, BPF_F_UPROBE_MULTI_RETURN, uretprobe_multi).
				for _, lt := range linkTypes(t, p) {
					if lt != mode && !(ret && mode == uapi.AttachMulti && lt == "uretprobe_multi") {
						t.Errorf("a link of mode %s has link_type %q", mode, lt)
					}
				}
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				for i := uintptr(0); i < SledLen; i++ {
					if b := memByte(t, sled.PC+i); b != 0x90 {
						t.Errorf("sled+%d holds %#x after detach, want 0x90", i, b)
					}
				}
				if got := probeFDs(t); got != before {
					t.Errorf("probe fds after Close: %d, before %d", got, before)
				}
			})
		}
	}
}

func TestHitsEqualCalls(t *testing.T) {
	needLive(t)
	nop := target(t, "nop")
	const calls = 100_000
	for _, mode := range []string{uapi.AttachMulti, uapi.AttachPerf} {
		for _, ret := range []bool{false, true} {
			t.Run(mode+"/"+probeKind(ret), func(t *testing.T) {
				p, err := Attach(context.Background(), Spec{Path: nop.Path, Offsets: []uint64{nop.Offset}, Mode: mode, Ret: ret})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				callLoop(nop.PC, calls)
				hits, err := p.Hits()
				if err != nil {
					t.Fatal(err)
				}
				if hits != calls {
					t.Errorf("hits = %d after %d calls", hits, calls)
				}
			})
		}
	}
}

func TestAttachErrorsNameErrno(t *testing.T) {
	needLive(t)
	nop := target(t, "nop")
	fi, err := os.Stat(nop.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{uapi.AttachMulti, uapi.AttachPerf} {
		before := probeFDs(t)
		_, err := Attach(context.Background(), Spec{Path: "/nonexistent/mmlab", Offsets: []uint64{0x1000}, Mode: mode})
		if !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "ENOENT") {
			t.Errorf("%v, missing file: %v, want ENOENT named", mode, err)
		}
		// An offset past the end of the file: uprobe_register refuses it.
		_, err = Attach(context.Background(), Spec{Path: nop.Path, Offsets: []uint64{nop.Offset, uint64(fi.Size()) + 4096}, Mode: mode})
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "EINVAL") {
			t.Errorf("%v, offset past EOF: %v, want EINVAL named", mode, err)
		}
		// A process that does not exist. Pid numbers stop below 1<<22.
		_, err = Attach(context.Background(), Spec{Path: nop.Path, Offsets: []uint64{nop.Offset}, Mode: mode, Pid: 1 << 22})
		if !errors.Is(err, syscall.ESRCH) || !strings.Contains(err.Error(), "ESRCH") {
			t.Errorf("%v, no such pid: %v, want ESRCH named", mode, err)
		}
		if b := memByte(t, nop.PC); b != 0x90 {
			t.Errorf("%v: nop target holds %#x after a failed attach", mode, b)
		}
		if got := probeFDs(t); got != before {
			t.Errorf("%v: probe fds after failed attaches: %d, before %d", mode, got, before)
		}
	}
}
