package uprobes

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"mmlab/cpu"
	"mmlab/errno"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/uapi"
)

// optProg: main calls f5 RCX times; f5 = "nop5; inc eax; ret", so RAX
// counts the calls that ran the probed function. sys makes the uprobe
// syscall from ordinary text.
func optProg(a *cpu.Asm) {
	a.Label("main").Label("loop").Call("f5").Label("after_call").Dec32(cpu.RCX).Jnz("loop").Hlt()
	a.Label("sys").MovImm32(cpu.RAX, uapi.NrUprobe).Syscall().Hlt()
	a.Label("f5").Nop5().Inc32(cpu.RAX).Label("f5_ret").Ret()
}

// nop5 is the probed instruction's bytes.
var nop5 = []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}

// wantTramp is where the trampoline of a site in the test text goes: the
// text is one page and the site near its start, so the free page above it
// is nearer than the one below.
const wantTramp = textAddr + 0x1000

func optEnv(t *testing.T, c Config) *env {
	e := newEnv(t, 1, TasksTrace, optProg)
	u, err := New(e.mach, c)
	if err != nil {
		t.Fatal(err)
	}
	e.u = u
	return e
}

// probedProc is an optEnv with a process p and a counting uprobe on f5.
func probedProc(t *testing.T, c Config) (*env, *kernel.Task, *counter, *Uprobe) {
	t.Helper()
	e := optEnv(t, c)
	p := e.newProc(t, "p")
	k := newCounter(true, false, nil)
	return e, p, k, mustRegister(t, e, "f5", &k.c)
}

// forOptimizedSite runs test in each optimizing design on a process whose
// probed f5 has been hit once, so that its site is optimized.
func forOptimizedSite(t *testing.T, test func(t *testing.T, e *env, p *kernel.Task, k *counter, up *Uprobe)) {
	for _, o := range optimizing {
		t.Run(o.String(), func(t *testing.T) {
			e, p, k, up := probedProc(t, Config{Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: o})
			wantHalt(t, e.run(t, p, 0, "main", calls(1)))
			test(t, e, p, k, up)
		})
	}
}

func siteBytes(t testing.TB, e *env, m *mm.MM) []byte { return readBytes(t, m, e.addr("f5"), 5) }

// callBytes is the optimized site: the call (jmp-slot: the jmp) to tramp.
func callBytes(e *env, tramp uint64) []byte {
	c := branchTo(e.u.opcode(), e.addr("f5"), tramp)
	return c[:]
}

// optimizing are the designs that optimize; each test of an optimized site
// runs in both.
var optimizing = []Optimize{OptimizeCall, OptimizeJmpSlot}

// mapsLine returns m's maps line named name ("" if none).
func mapsLine(m *mm.MM, name string) string {
	for l := range strings.Lines(procfs.Maps(m)) {
		if strings.HasSuffix(strings.TrimSpace(l), name) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// The first hit rewrites the nop5 into a call to a trampoline at the
// nearest free page, mapped r-xp; every later hit enters through
// the uprobe syscall, and every hit runs the handler once. With
// optimization off the site stays an int3.
func TestOptimizedHit(t *testing.T) {
	t.Parallel()
	for _, fl := range flavors {
		for _, o := range Optimizations.Values() {
			off := o == OptimizeOff
			t.Run(fmt.Sprintf("%s/%v", fl, o), func(t *testing.T) {
				e, p, k, _ := probedProc(t, Config{Flavor: fl, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: o})
				res := e.run(t, p, 0, "main", calls(5))
				wantHalt(t, res)
				if k.hits != 5 || res.regs.R[cpu.RAX] != 5 {
					t.Fatalf("hits %d rax %d, want 5 and 5", k.hits, res.regs.R[cpu.RAX])
				}
				got, line := siteBytes(t, e, p.MM), mapsLine(p.MM, trampName)
				if off {
					if !bytes.Equal(got, append([]byte{swbp}, nop5[1:]...)) || line != "" || e.mach.TextPokeSyncs() != 0 {
						t.Errorf("site % x, maps %q, %d syncs: want an int3 and no trampoline", got, line, e.mach.TextPokeSyncs())
					}
					return
				}
				if !bytes.Equal(got, callBytes(e, wantTramp)) {
					t.Errorf("site % x, want % x", got, callBytes(e, wantTramp))
				}
				if want := "00401000-00402000 r-xp 00000000 00:00 0                                  [uprobes-trampoline]"; line != want {
					t.Errorf("maps line %q, want %q", line, want)
				}
				if n := e.mach.TextPokeSyncs(); n != 3 {
					t.Errorf("%d text-poke syncs, want 3 (before and after the tail write, after the head)", n)
				}
				if tr := e.u.Trampolines(p.MM); len(tr) != 1 || tr[0] != wantTramp {
					t.Errorf("trampolines %#x", tr)
				}
			})
		}
	}
}

// The uprobe syscall from anywhere but a trampoline fails with ENXIO.
func TestUprobeSyscallOutsideTrampoline(t *testing.T) {
	t.Parallel()
	for _, o := range optimizing {
		t.Run(o.String(), func(t *testing.T) {
			e := optEnv(t, Config{Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: o})
			res := e.run(t, e.newProc(t, "p"), 0, "sys", nil)
			wantHalt(t, res)
			if got := int64(res.regs.R[cpu.RAX]); got != -int64(enxio) {
				t.Errorf("rax %d, want -ENXIO", got)
			}
		})
	}
}

// runOptimized registers the consumer newCons returns on f5 of a fresh
// optEnv of optimization o, runs main n times in a process of it, and wants
// it to halt with the site optimized.
func runOptimized(t *testing.T, o Optimize, n uint64, newCons func(*env) *Consumer) (*env, result) {
	t.Helper()
	e := optEnv(t, Config{Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: o})
	p := e.newProc(t, "p")
	mustRegister(t, e, "f5", newCons(e))
	res := e.run(t, p, 0, "main", calls(n))
	wantHalt(t, res)
	if got := siteBytes(t, e, p.MM); got[0] != e.u.opcode() {
		t.Errorf("site % x not optimized", got)
	}
	return e, res
}

// A handler that moves ip skips the probed function's body on the int3
// path (first hit) and on the optimized path (the trampoline returns
// there) alike.
func TestOptimizedHandlerSetsIP(t *testing.T) {
	t.Parallel()
	for _, o := range optimizing {
		t.Run(o.String(), func(t *testing.T) {
			hits := 0
			_, res := runOptimized(t, o, 4, func(e *env) *Consumer {
				skip := e.addr("f5_ret")
				return &Consumer{Handler: func(r *kernel.Runner) int { hits++; r.Regs.RIP = skip; return 0 }}
			})
			if hits != 4 || res.regs.R[cpu.RAX] != 0 {
				t.Errorf("hits %d rax %d, want 4 and 0", hits, res.regs.R[cpu.RAX])
			}
		})
	}
}

// A uretprobe on an optimized site sees every return, at the caller's
// return address.
func TestUretprobeOnOptimizedSite(t *testing.T) {
	t.Parallel()
	for _, o := range optimizing {
		t.Run(o.String(), func(t *testing.T) {
			k := newCounter(true, true, nil)
			e, res := runOptimized(t, o, 3, func(*env) *Consumer { return &k.c })
			if k.hits != 3 || k.rets != 3 || res.regs.R[cpu.RAX] != 3 {
				t.Fatalf("hits %d rets %d rax %d, want 3 each", k.hits, k.rets, res.regs.R[cpu.RAX])
			}
			for i := range k.rets {
				if k.fns[i] != e.addr("f5") || k.retIPs[i] != e.addr("after_call") {
					t.Errorf("return %d: fn %#x ip %#x", i, k.fns[i], k.retIPs[i])
				}
			}
		})
	}
}

// With the page above the text taken, the nearest free page is the one
// below it: the two searches are compared, neither direction assumed.
func TestTrampolineBelow(t *testing.T) {
	t.Parallel()
	for _, o := range optimizing {
		t.Run(o.String(), func(t *testing.T) {
			e := optEnv(t, Config{Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: o})
			p := e.newProc(t, "p")
			if _, err := p.MM.Mmap(nil, textAddr+0x1000, 0x100000, mm.PROT_READ, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
				t.Fatal(err)
			}
			mustRegister(t, e, "f5", &newCounter(true, false, nil).c)
			wantHalt(t, e.run(t, p, 0, "main", calls(2)))
			below := uint64(textAddr - 0x1000)
			if got := siteBytes(t, e, p.MM); !bytes.Equal(got, callBytes(e, below)) {
				t.Errorf("site % x, want a call to %#x", got, below)
			}
			if l := mapsLine(p.MM, trampName); !strings.HasPrefix(l, "003ff000-00400000 r-xp ") {
				t.Errorf("maps line %q", l)
			}
		})
	}
}

// The trampoline cannot be moved (EPERM) but can be unmapped; exit
// forgets the mm's trampolines.
func TestTrampolineMremapMunmapExit(t *testing.T) {
	t.Parallel()
	forOptimizedSite(t, func(t *testing.T, e *env, p *kernel.Task, _ *counter, _ *Uprobe) {
		if _, err := p.MM.Mremap(nil, wantTramp, 0x1000, 0x1000, mm.MREMAP_MAYMOVE|mm.MREMAP_FIXED, 0x10000000); !errors.Is(err, errno.EPERM) {
			t.Errorf("mremap: %v, want EPERM", err)
		}
		if err := p.MM.Munmap(nil, wantTramp, 0x1000); err != nil {
			t.Errorf("munmap: %v", err)
		}
		res := e.run(t, p, 0, "main", calls(1))
		if res.stop.Reason != cpu.StopFault || res.stop.Fault.Addr != wantTramp {
			t.Errorf("call into the unmapped trampoline: %v", res.stop)
		}
		p.ExitMM()
		if tr := e.u.Trampolines(p.MM); tr != nil {
			t.Errorf("trampolines %#x after exit", tr)
		}
	})
}

// A fork after the optimization copies the text page with its call but not
// the trampoline (VM_DONTCOPY): the child dies of SIGSEGV when it runs the
// site, as on the live kernel (TestLiveForkedChildOfOptimized in
// live/uprobe).
func TestForkAfterOptimization(t *testing.T) {
	t.Parallel()
	forOptimizedSite(t, func(t *testing.T, e *env, p *kernel.Task, _ *counter, _ *Uprobe) {
		child := forkOf(t, e, p)
		if mapsLine(child.MM, trampName) != "" {
			t.Error("the child has a trampoline")
		}
		if got := siteBytes(t, e, child.MM); !bytes.Equal(got, callBytes(e, wantTramp)) {
			t.Errorf("child site % x", got)
		}
		res := e.run(t, child, 0, "main", calls(1))
		if res.stop.Reason != cpu.StopFault || res.stop.Fault.Addr != wantTramp || !slicesHas(res.sigs, kernel.SIGSEGV) {
			t.Errorf("child: %v, signals %v; want SIGSEGV at %#x", res.stop, res.sigs, wantTramp)
		}
	})
}

// onThread runs fn as task p on its model thread and waits for it.
func onThread(e *env, p *kernel.Task, fn func(r *kernel.Runner)) { <-e.mach.Start(p, 0, 0, fn).Done() }

func forkOf(t *testing.T, e *env, p *kernel.Task) *kernel.Task {
	t.Helper()
	var child *kernel.Task
	var err error
	onThread(e, p, func(r *kernel.Runner) { child, err = r.Task.Fork() })
	if err != nil {
		t.Fatal(err)
	}
	return child
}

func slicesHas(s []kernel.Signal, sig kernel.Signal) bool {
	for _, x := range s {
		if x == sig {
			return true
		}
	}
	return false
}

// Site states of the removal's kill table.
func siteStates(e *env) (call, int3Rel, int3Orig, corrupt []byte) {
	call = callBytes(e, wantTramp)
	int3Rel = append([]byte{swbp}, call[1:]...)
	int3Orig = append([]byte{swbp}, nop5[1:]...)
	corrupt = append([]byte{nop5[0]}, call[1:]...)
	return
}

// A removal of an optimized uprobe killed at each write of
// swbp_unoptimize(), then a hit, a new register and unregister, a fork, or
// nothing, in both designs. The unregistering task is of another process,
// whose own site is optimized too. p is visited first; the kill makes every
// later write fail (EINTR), so the other mms keep their calls.
//
// Before: the site is left as the write it stopped at says (the call, int3
// + the call's displacement, int3 + the original tail), the warning
// counts, and the uprobe leaks: a hit still finds it and optimizes the
// site again over the int3; a later restore of "int3 + displacement"
// writes only byte 0 and corrupts the instruction; a forked child of a
// site left as an int3 optimizes its own. After: the removal completes.
func TestKilledUnoptimize(t *testing.T) {
	t.Parallel()
	type follow struct {
		name string
		// run does the follow-up and returns the mm whose site to look at
		// and how a task running the site there ended.
		run func(t *testing.T, e *env, p, t2 *kernel.Task) (*mm.MM, result)
	}
	follows := []follow{
		{"nothing", func(t *testing.T, e *env, p, _ *kernel.Task) (*mm.MM, result) { return p.MM, result{} }},
		{"hit", func(t *testing.T, e *env, p, _ *kernel.Task) (*mm.MM, result) {
			return p.MM, e.run(t, p, 0, "main", calls(2))
		}},
		{"reregister", func(t *testing.T, e *env, p, t2 *kernel.Task) (*mm.MM, result) {
			c := newCounter(true, false, nil)
			var err error
			onThread(e, t2, func(r *kernel.Runner) {
				var up *Uprobe
				if up, err = e.u.Register(r, e.inode, e.off("f5"), &c.c); err == nil {
					err = e.u.UnregisterNosync(r, up, &c.c)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			return p.MM, e.run(t, p, 0, "main", calls(2))
		}},
		{"fork", func(t *testing.T, e *env, p, _ *kernel.Task) (*mm.MM, result) {
			child := forkOf(t, e, p)
			return child.MM, e.run(t, child, 0, "main", calls(2))
		}},
	}
	for _, o := range optimizing {
		for _, d := range designs {
			for _, kill := range []int{writeInt3, writeTail, writeHead} {
				for _, f := range follows {
					t.Run(fmt.Sprintf("%v/%v/before-write-%d/%s", o, d, kill, f.name), func(t *testing.T) {
						e := optEnv(t, Config{Flavor: TasksTrace, Design: d, HitPath: HitPathToday, Optimize: o})
						call, int3Rel, int3Orig, corrupt := siteStates(e)
						p, tracer, t2 := e.newProc(t, "p"), e.newProc(t, "tracer"), e.newProc(t, "t2")
						k := newCounter(true, false, nil)
						up := mustRegister(t, e, "f5", &k.c)
						for _, q := range []*kernel.Task{p, tracer, t2} {
							wantHalt(t, e.run(t, q, 0, "main", calls(1)))
						}
						e.u.setTextWriteHook(func(m *mm.MM, _ uint64, n int) {
							if m == p.MM && n == kill {
								tracer.Kill()
							}
						})
						var err error
						onThread(e, tracer, func(r *kernel.Runner) { err = e.u.UnregisterNosync(r, up, &k.c) })
						e.u.setTextWriteHook(nil)
						left := siteBytes(t, e, p.MM)
						if d == kernel.DesignAfter {
							if err != nil || !bytes.Equal(left, nop5) || e.u.Warnings() != 0 {
								t.Fatalf("unregister %v, site % x, %d warnings; want a complete removal, no warning", err, left, e.u.Warnings())
							}
						} else {
							want := map[int][]byte{writeInt3: call, writeTail: int3Rel, writeHead: int3Orig}[kill]
							if !errors.Is(err, errno.EINTR) || !bytes.Equal(left, want) || e.u.Warnings() != 1 {
								t.Fatalf("unregister %v, site % x, %d warnings; want EINTR, % x, 1 warning", err, left, e.u.Warnings(), want)
							}
							if e.u.Lookup(e.inode, e.off("f5")) != up {
								t.Fatal("the uprobe was not leaked")
							}
						}
						m, res := f.run(t, e, p, t2)
						got := siteBytes(t, e, m)
						var want []byte
						var sig kernel.Signal // what the run dies of; 0: it halts after 2 calls
						switch {
						case d == kernel.DesignAfter:
							want = nop5
						case f.name == "nothing":
							want = left
						case f.name == "hit":
							want = call // optimized again over the int3, or still a call
						case f.name == "reregister" && kill == writeTail:
							want, sig = corrupt, sigill
						case f.name == "reregister":
							want = nop5
						case f.name == "fork" && kill == writeInt3:
							want, sig = call, kernel.SIGSEGV // the call into no trampoline
						case f.name == "fork":
							want = call // the child's own trampoline, at the same address
						}
						if !bytes.Equal(got, want) {
							t.Errorf("site % x, want % x", got, want)
						}
						if f.name == "nothing" {
							return
						}
						if sig == 0 {
							wantHalt(t, res)
							if res.regs.R[cpu.RAX] != 2 {
								t.Errorf("rax %d, want 2", res.regs.R[cpu.RAX])
							}
						} else if res.stop.Reason != cpu.StopFault || !slicesHas(res.sigs, sig) {
							t.Errorf("ran %v, signals %v; want %v", res.stop, res.sigs, sig)
						}
					})
				}
			}
		}
	}
}

// A removal of an optimized uprobe by a task killed before it reaches the
// site, as when it is killed while it waits for the probed mm's mmap write
// lock (register_for_each_vma's mmap_write_lock() is not killable before
// seed 000, so a kill during that wait and one just before it leave the
// same state): is_optimized()'s read fails first (GUP: EINTR for a killed
// caller), so set_orig_insn() returns before swbp_unoptimize() and its
// WARN_ON_ONCE. Before, every site keeps its call, nothing warns and the
// uprobe leaks; after (patch 8), the removal completes. The live kernel's
// counterpart is live/uprobe's opt-in TestLiveWarnCountKilledRemoval.
func TestKilledBeforeUnoptimize(t *testing.T) {
	t.Parallel()
	for _, o := range optimizing {
		for _, d := range designs {
			t.Run(fmt.Sprintf("%v/%v", o, d), func(t *testing.T) {
				e := optEnv(t, Config{Flavor: TasksTrace, Design: d, HitPath: HitPathToday, Optimize: o})
				call, _, _, _ := siteStates(e)
				p, tracer := e.newProc(t, "p"), e.newProc(t, "tracer")
				k := newCounter(true, false, nil)
				up := mustRegister(t, e, "f5", &k.c)
				for _, q := range []*kernel.Task{p, tracer} {
					wantHalt(t, e.run(t, q, 0, "main", calls(1)))
				}
				tracer.Kill()
				var err error
				onThread(e, tracer, func(r *kernel.Runner) { err = e.u.UnregisterNosync(r, up, &k.c) })
				want, wantErr := call, error(errno.EINTR)
				if d == kernel.DesignAfter {
					want, wantErr = nop5, nil
				}
				for _, q := range []*kernel.Task{p, tracer} {
					if got := siteBytes(t, e, q.MM); !bytes.Equal(got, want) {
						t.Errorf("%s: site % x, want % x", q.Comm, got, want)
					}
				}
				if !errors.Is(err, wantErr) || e.u.Warnings() != 0 {
					t.Errorf("unregister %v, %d warnings; want %v, no warning", err, e.u.Warnings(), wantErr)
				}
				if leaked := e.u.Lookup(e.inode, e.off("f5")) == up; leaked != (d == kernel.DesignBefore) {
					t.Errorf("uprobe leaked %v", leaked)
				}
			})
		}
	}
}

// The probed task killed during its first hit's optimization: before the
// tail write the site stays "int3 + original tail", before the head write
// it is "int3 + the call's displacement". Either way the uprobe is never
// optimized again and the new trampoline leaves the list but stays
// mapped. Before, this warns, and a later removal of the second state
// writes only byte 0 (a corrupted instruction); after, nothing warns and
// the removal finishes the half-written site (seed 000 patch 3).
func TestKilledFirstHitOptimization(t *testing.T) {
	t.Parallel()
	for _, o := range optimizing {
		for _, d := range designs {
			for _, kill := range []int{writeTail, writeHead} {
				t.Run(fmt.Sprintf("%v/%v/before-write-%d", o, d, kill), func(t *testing.T) {
					e := optEnv(t, Config{Flavor: TasksTrace, Design: d, HitPath: HitPathToday, Optimize: o})
					_, int3Rel, int3Orig, corrupt := siteStates(e)
					p, t2 := e.newProc(t, "p"), e.newProc(t, "t2")
					k := newCounter(true, false, nil)
					up := mustRegister(t, e, "f5", &k.c)
					e.u.setTextWriteHook(func(m *mm.MM, _ uint64, n int) {
						if m == p.MM && n == kill {
							p.Kill()
						}
					})
					e.run(t, p, 0, "main", calls(1))
					e.u.setTextWriteHook(nil)
					want := map[int][]byte{writeTail: int3Orig, writeHead: int3Rel}[kill]
					if got := siteBytes(t, e, p.MM); !bytes.Equal(got, want) {
						t.Errorf("site % x, want % x", got, want)
					}
					if wantWarn := int64(map[kernel.Design]int{kernel.DesignBefore: 1}[d]); e.u.Warnings() != wantWarn {
						t.Errorf("%d warnings, want %d", e.u.Warnings(), wantWarn)
					}
					if !up.optimizeFail.Load() || len(e.u.Trampolines(p.MM)) != 0 || mapsLine(p.MM, trampName) == "" {
						t.Errorf("fail %v, list %#x, maps %q: want the site given up, the trampoline off the list and mapped",
							up.optimizeFail.Load(), e.u.Trampolines(p.MM), mapsLine(p.MM, trampName))
					}
					var err error
					onThread(e, t2, func(r *kernel.Runner) { err = e.u.UnregisterNosync(r, up, &k.c) })
					if err != nil {
						t.Fatal(err)
					}
					want = nop5
					if d == kernel.DesignBefore && kill == writeHead {
						want = corrupt
					}
					if got := siteBytes(t, e, p.MM); !bytes.Equal(got, want) {
						t.Errorf("after removal: site % x, want % x", got, want)
					}
				})
			}
		}
	}
}

// A removal by a task of another process, which has no trampoline there,
// restores the optimized site in the three writes, as the live kernel does
// (live/uprobe's TestLiveRemoteUnregisterRestores).
func TestRemoteUnregisterRestores(t *testing.T) {
	t.Parallel()
	forOptimizedSite(t, func(t *testing.T, e *env, p *kernel.Task, k *counter, up *Uprobe) {
		if err := e.u.UnregisterNosync(e.mach.NewTask("tracer"), up, &k.c); err != nil {
			t.Fatal(err)
		}
		e.u.UnregisterSync(nil)
		if got := siteBytes(t, e, p.MM); !bytes.Equal(got, nop5) {
			t.Errorf("site % x, want the nop5 restored", got)
		}
		res := e.run(t, p, 0, "main", calls(3))
		wantHalt(t, res)
		if res.regs.R[cpu.RAX] != 3 || k.hits != 1 {
			t.Errorf("rax %d hits %d, want 3 calls and no more hits", res.regs.R[cpu.RAX], k.hits)
		}
	})
}

// The text-poke syncs come before the first write of an optimization and
// after every write, of an optimization and of a removal alike.
func TestTextPokeSyncOrder(t *testing.T) {
	t.Parallel()
	for _, o := range optimizing {
		t.Run(o.String(), func(t *testing.T) {
			e, p, k, up := probedProc(t, Config{Flavor: TasksTrace, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: o})
			var at []int64 // syncs done when each write starts
			e.u.setTextWriteHook(func(_ *mm.MM, _ uint64, n int) { at = append(at, int64(n), e.mach.TextPokeSyncs()) })
			wantHalt(t, e.run(t, p, 0, "main", calls(1)))
			var err error
			onThread(e, p, func(r *kernel.Runner) { err = e.u.UnregisterNosync(r, up, &k.c) })
			if err != nil {
				t.Fatal(err)
			}
			want := []int64{writeTail, 1, writeHead, 2, writeInt3, 3, writeTail, 4, writeHead, 5}
			if fmt.Sprint(at) != fmt.Sprint(want) || e.mach.TextPokeSyncs() != 6 {
				t.Errorf("(write, syncs before it) %v, %d syncs in all; want %v, 6", at, e.mach.TextPokeSyncs(), want)
			}
			if got := siteBytes(t, e, p.MM); !bytes.Equal(got, nop5) {
				t.Errorf("site % x after removal", got)
			}
		})
	}
}

// Two threads of a process hit the nop5 on two CPUs while a third
// registers and unregisters it over and over, in both optimizing designs
// (jmp-slot: a thread may be between the jmp and the slot's syscall while
// the site is restored and optimized again): every call runs the function
// once, every hit sees the registers of the probe, and every completed
// removal leaves the original bytes.
func TestStressOptimizeWhileHitting(t *testing.T) {
	t.Parallel()
	for _, o := range optimizing {
		for _, fl := range flavors {
			t.Run(fmt.Sprintf("%v/%v", o, fl), func(t *testing.T) {
				e := newEnvConfig(t, 2, Config{Flavor: fl, Design: kernel.DesignBefore, HitPath: HitPathToday, Optimize: o}, optProg)
				p := e.newProc(t, "p")
				threads := []*kernel.Task{p, p.NewThread()}
				tracer := p.NewThread() // runs on the test's goroutine
				var stop atomic.Bool
				errs := make(chan error, 2)
				var runners []*kernel.Runner
				for i, th := range threads {
					sp := stackTop - 64 - uint64(i)*0x1000
					runners = append(runners, e.mach.Start(th, i, 0, func(r *kernel.Runner) {
						for n := 0; !stop.Load(); n++ {
							r.Regs = cpu.Regs{RIP: e.addr("main")}
							r.Regs.R[cpu.RSP], r.Regs.R[cpu.RCX], r.Regs.R[cpu.R11] = sp, 40, 0x5a5a
							s := r.Run()
							if s.Reason != cpu.StopHalt || r.Regs.R[cpu.RSP] != sp || r.Regs.R[cpu.RAX] != 40 || r.Regs.R[cpu.R11] != 0x5a5a {
								errs <- fmt.Errorf("%v batch %d: %v, regs %v, signals %v", r.Task, n, s, &r.Regs, r.Task.PendingSignals())
								return
							}
						}
					}))
				}
				var bad atomic.Value
				c := &Consumer{Handler: func(r *kernel.Runner) int {
					if r.Regs.RIP != e.addr("f5") {
						bad.Store(fmt.Sprintf("handler at %#x", r.Regs.RIP))
					}
					return 0
				}}
				optimized := 0
				for round := range 30 {
					up, err := e.u.Register(tracer, e.inode, e.off("f5"), c)
					if err != nil {
						t.Fatal(err)
					}
					// The runners keep hitting: the first hit optimizes
					// the site. Wait for it (or for a runner's failure).
					for siteBytes(t, e, p.MM)[0] != e.u.opcode() && len(errs) == 0 {
						runtime.Gosched()
					}
					if siteBytes(t, e, p.MM)[0] == e.u.opcode() {
						optimized++
					}
					if err := e.u.UnregisterNosync(tracer, up, c); err != nil {
						t.Fatal(err)
					}
					e.u.UnregisterSync(nil)
					if got := siteBytes(t, e, p.MM); !bytes.Equal(got, nop5) {
						t.Fatalf("round %d: site % x after unregister", round, got)
					}
				}
				stopRunners(t, &stop, runners, errs)
				if s := bad.Load(); s != nil {
					t.Fatal(s)
				}
				if optimized != 30 || len(e.u.Trampolines(p.MM)) != 1 {
					t.Errorf("%d rounds optimized, trampolines %#x; want all 30, and one trampoline reused", optimized, e.u.Trampolines(p.MM))
				}
			})
		}
	}
}

// stopRunners stops the looping runners and fails with the first error
// one of them sent.
func stopRunners(t *testing.T, stop *atomic.Bool, runners []*kernel.Runner, errs <-chan error) {
	t.Helper()
	stop.Store(true)
	for _, r := range runners {
		<-r.Done()
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// find_nearest_trampoline takes the page below only if it is strictly
// nearer to the call's end than the page above.
func TestFindNearestTrampolineTie(t *testing.T) {
	t.Parallel()
	m := mm.New(new(mm.Namespace), machine.MustNamed("x86-64").Features)
	if _, err := m.Mmap(nil, 0x400000, 0x2000, mm.PROT_READ|mm.PROT_EXEC, mm.MAP_PRIVATE|mm.MAP_ANONYMOUS|mm.MAP_FIXED, nil, 0); err != nil {
		t.Fatal(err)
	}
	m.MmapReadLock(nil)
	defer m.MmapReadUnlock()
	// Free pages at 0x3ff000 and 0x402000; a call ending at 0x400800 is
	// 0x1800 from both.
	for _, c := range []struct{ vaddr, want uint64 }{
		{0x400800 - 5, 0x402000},
		{0x400800 - 6, 0x3ff000},
		{0x400800 - 4, 0x402000},
	} {
		if got, err := findNearestTrampoline(m, c.vaddr); err != nil || got != c.want {
			t.Errorf("site %#x: %#x, %v; want %#x", c.vaddr, got, err, c.want)
		}
	}
}
