package uprobe

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"mmlab/cpu"
	"mmlab/kernel"
	"mmlab/machine"
	"mmlab/mm"
	"mmlab/procfs"
	"mmlab/uapi"
	"mmlab/uprobes"
)

// x86-64 optimized uprobes on the live kernel (v6.18+), each checked
// against the model (package uprobes) where the model has a counterpart.

const nrUprobe = 336 // __NR_uprobe

// needOptimized skips unless the kernel has the uprobe syscall (v6.18+
// x86-64): a call from outside a trampoline gets ENXIO, an older kernel
// ENOSYS.
func needOptimized(t *testing.T) {
	t.Helper()
	needLive(t)
	if _, _, e := unix.Syscall(nrUprobe, 0, 0, 0); e == unix.ENOSYS {
		t.Skip("no uprobe syscall: kernel without optimized uprobes")
	}
}

// The uprobe syscall from ordinary code fails with ENXIO, as in the model
// (uprobes.TestUprobeSyscallOutsideTrampoline).
func TestLiveUprobeSyscallOutsideTrampoline(t *testing.T) {
	if !haveTargets {
		t.Skip("not x86-64")
	}
	_, _, e := unix.Syscall(nrUprobe, 0, 0, 0)
	if e == unix.ENOSYS {
		t.Skip("no uprobe syscall: kernel without optimized uprobes")
	}
	if e != unix.ENXIO {
		t.Errorf("uprobe syscall from a Go function: %v, want ENXIO", e)
	}
}

// inFreshProcess reports whether t runs in a fresh process, one that no
// earlier test of this binary has given uprobes, their pages or their mm
// flags (MMF_HAS_UPROBES). If not, it runs t alone in a re-execution of
// this test binary, checks that it passed, and returns false.
func inFreshProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv("MMLAB_UPROBE_FRESH") != "" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "MMLAB_UPROBE_FRESH=1")
	out, err := cmd.CombinedOutput()
	t.Logf("fresh process:\n%s", out)
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Errorf("fresh process: %v", err)
	}
	return false
}

// mapsEntry is one line of /proc/PID/maps.
type mapsEntry struct {
	start, end, pgoff uint64
	perms, path, line string
}

func readMaps(t *testing.T) []mapsEntry {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	var out []mapsEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		lo, hi, _ := strings.Cut(f[0], "-")
		e := mapsEntry{perms: f[1], line: sc.Text()}
		e.start, _ = strconv.ParseUint(lo, 16, 64)
		e.end, _ = strconv.ParseUint(hi, 16, 64)
		e.pgoff, _ = strconv.ParseUint(f[2], 16, 64)
		if len(f) > 5 {
			e.path = strings.Join(f[5:], " ")
		}
		out = append(out, e)
	}
	return out
}

// specialLines returns the lines of the uprobes special mappings, in
// address order.
func specialLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasSuffix(l, " [uprobes-trampoline]") || strings.HasSuffix(l, " [uprobes]") {
			out = append(out, l)
		}
	}
	return out
}

// codeFile is the probed file of the "nearest free page above" site: a
// nop5 at codeSite, then ret and hlt (the hlt is where the model's runs
// return to).
const codeSite = 0x10

func writeCodeFile(t *testing.T) string {
	code := bytes.Repeat([]byte{0xcc}, codeSite)
	code = append(code, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3, 0xf4)
	path := filepath.Join(t.TempDir(), "code")
	if err := os.WriteFile(path, code, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// mapAboveHole maps path's first page r-x with 16 MiB of PROT_NONE memory
// right below it and a two-page hole right above it (the smallest hole a
// page-aligned vm_unmapped_area takes), fenced by more PROT_NONE memory:
// the nearest free page of a site in it is above it.
func mapAboveHole(t *testing.T, path string) uintptr {
	const below, hole, fence = 16 << 20, 2 * 4096, 64 << 10
	total := below + 4096 + hole + fence
	base, err := unix.MmapPtr(-1, 0, nil, uintptr(total), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.MunmapPtr(base, uintptr(total)) })
	at := unsafe.Add(base, below)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := unix.MmapPtr(int(f.Fd()), 0, at, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_FIXED); err != nil {
		t.Fatal(err)
	}
	if err := unix.MunmapPtr(unsafe.Add(at, 4096), hole); err != nil {
		t.Fatal(err)
	}
	return uintptr(at)
}

// After hits on two nop5 sites (one in this binary, whose nearest free page
// is the kernel's to choose, one in a file mapped with its nearest free page
// above it) and on a single-stepped ret, this process's maps gain two
// [uprobes-trampoline] pages and the [uprobes] XOL page. The model, given
// the same layout, the same files and the same probes, prints the same
// lines.
//
// It runs in a fresh process (a re-execution of this test binary), whose
// maps no earlier test has given uprobes pages.
func TestLiveOptimizedMapsMatchModel(t *testing.T) {
	needOptimized(t)
	if !inFreshProcess(t) {
		return
	}
	nop5, ret := target(t, "nop5"), target(t, "ret")
	codePath := writeCodeFile(t)
	codeAt := mapAboveHole(t, codePath)
	layout := readMaps(t)
	for _, e := range layout {
		if strings.HasPrefix(e.path, "[uprobes") {
			t.Skipf("this process already has %s: not a clean layout", e.line)
		}
	}
	pid := os.Getpid()
	self, err := Attach(context.Background(), Spec{Path: nop5.Path, Offsets: []uint64{nop5.Offset, ret.Offset}, Mode: uapi.AttachMulti, Pid: pid})
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	code, err := Attach(context.Background(), Spec{Path: codePath, Offsets: []uint64{codeSite}, Mode: uapi.AttachMulti, Pid: pid})
	if err != nil {
		t.Fatal(err)
	}
	defer code.Close()
	callLoop(nop5.PC, 2)
	callLoop(ret.PC, 2)
	callLoop(codeAt+codeSite, 2)
	var live []string
	for _, e := range readMaps(t) {
		live = append(live, e.line)
	}
	live = specialLines(live)
	if b := memByte(t, nop5.PC); b != 0xe8 {
		t.Errorf("binary nop5 site holds %#x, want a call (0xe8)", b)
	}
	if b := memByte(t, codeAt+codeSite); b != 0xe8 {
		t.Errorf("file nop5 site holds %#x, want a call (0xe8)", b)
	}
	if b := memByte(t, ret.PC); b != 0xcc {
		t.Errorf("ret site holds %#x, want int3", b)
	}
	model := modelSpecialLines(t, layout, []modelSite{
		{path: nop5.Path, offset: nop5.Offset, addr: uint64(nop5.PC)},
		{path: nop5.Path, offset: ret.Offset, addr: uint64(ret.PC)},
		{path: codePath, offset: codeSite, addr: uint64(codeAt + codeSite)},
	}, uint64(codeAt+codeSite+6))
	t.Logf("live:\n%s\nmodel:\n%s", strings.Join(live, "\n"), strings.Join(model, "\n"))
	if len(live) != 3 {
		t.Errorf("live has %d uprobes special mappings, want 2 trampolines and the XOL page", len(live))
	}
	if strings.Join(live, "\n") != strings.Join(model, "\n") {
		t.Error("the model's special mappings differ from the live kernel's")
	}
	if want := uint64(codeAt) + 4096; !containsStart(live, want) {
		t.Errorf("no trampoline at %#x, the free page above the file site", want)
	}
}

func containsStart(lines []string, start uint64) bool {
	p := strconv.FormatUint(start, 16)
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, "0"), p+"-") {
			return true
		}
	}
	return false
}

// modelSite is a probe of the model run: the file and offset, and the
// address it is mapped at.
type modelSite struct {
	path         string
	offset, addr uint64
}

// modelSpecialLines builds a model process of the live layout (every file
// mapping of the probed files from the file's bytes, everything else as
// anonymous memory of the same protection), registers the sites, runs each
// once from a call whose return address is hltAt, and returns the model's
// maps lines of the uprobes special mappings.
func modelSpecialLines(t *testing.T, layout []mapsEntry, sites []modelSite, hltAt uint64) []string {
	t.Helper()
	mach := kernel.NewMachine(machine.Host(), 1)
	defer mach.Stop()
	u, err := uprobes.New(mach, uprobes.Config{Flavor: uprobes.TasksTrace, Design: kernel.DesignBefore, HitPath: uprobes.HitPathToday, Optimize: uprobes.OptimizeCall})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*mm.File{}
	inodes := map[string]*mm.Inode{}
	for _, s := range sites {
		if files[s.path] != nil {
			continue
		}
		b, err := os.ReadFile(s.path)
		if err != nil {
			t.Fatal(err)
		}
		in := mm.NewInode(&mach.NS.MM, s.path, uint64(len(b)), func(off uint64) byte { return b[off] })
		inodes[s.path], files[s.path] = in, mm.Open(in)
	}
	task := mach.NewTaskMM("model")
	m := task.MM
	m.Hooks = u
	var stackTop uint64
	for _, e := range layout {
		if e.end > m.TaskSize() {
			continue // [vsyscall]
		}
		prot := 0
		for i, bit := range []int{mm.PROT_READ, mm.PROT_WRITE, mm.PROT_EXEC} {
			if e.perms[i] != '-' {
				prot |= bit
			}
		}
		flags := mm.MAP_PRIVATE | mm.MAP_FIXED
		if e.perms[3] == 's' {
			flags = mm.MAP_SHARED | mm.MAP_FIXED
		}
		var f *mm.File
		off := uint64(0)
		if files[e.path] != nil {
			f, off = files[e.path], e.pgoff
		} else {
			flags |= mm.MAP_ANONYMOUS
		}
		if _, err := m.Mmap(nil, e.start, e.end-e.start, prot, flags, f, off); err != nil {
			t.Fatalf("model mmap of %q: %v", e.line, err)
		}
		if e.path == "[stack]" {
			stackTop = e.end
		}
	}
	for _, s := range sites {
		if _, err := u.Register(nil, inodes[s.path], s.offset, &uprobes.Consumer{Handler: func(*kernel.Runner) int { return 0 }}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sites {
		var stop cpu.Stop
		r := mach.Start(task, 0, 0, func(r *kernel.Runner) {
			sp := stackTop - 4096
			r.Regs = cpu.Regs{RIP: s.addr}
			r.Regs.R[cpu.RSP] = sp
			if err := r.Interp().Store64(r, sp, hltAt); err != nil {
				stop = cpu.Stop{Reason: cpu.StopFault}
				return
			}
			stop = r.Run()
		})
		<-r.Done()
		if stop.Reason != cpu.StopHalt {
			t.Fatalf("model run of %#x: %v, signals %v", s.addr, stop, task.PendingSignals())
		}
	}
	return specialLines(strings.Split(strings.TrimSuffix(procfs.Maps(m), "\n"), "\n"))
}

// forkRunSite forks a child (a raw fork(2), as live/forkstall does) that
// runs the target at pc once with SIGSEGV and SIGILL at their default
// actions, and exits 0 if it returns; it returns the child's wait status.
func forkRunSite(t *testing.T, pc uintptr) syscall.WaitStatus {
	t.Helper()
	pid, e := rawForkRun(pc)
	if e != 0 {
		t.Fatal(e)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	return ws
}

// kernelSigaction is the x86-64 struct sigaction of rt_sigaction(2).
type kernelSigaction struct {
	handler, flags, restorer, mask uint64
}

// rawForkRun is forkRunSite's fork: only nosplit code and raw system calls
// run in the child.
//
//go:nosplit
//go:norace
func rawForkRun(pc uintptr) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	if r != 0 {
		return int(r), 0
	}
	var dfl kernelSigaction // SIG_DFL
	for _, sig := range [...]uintptr{uintptr(syscall.SIGSEGV), uintptr(syscall.SIGILL), uintptr(syscall.SIGTRAP)} {
		syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	}
	callLoop(pc, 1)
	for {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
}

// A fork after the nop5 site was optimized copies the text with the call
// but not the trampoline (VM_DONTCOPY): the child dies of SIGSEGV running
// the site, as in the model (uprobes.TestForkAfterOptimization). Before the
// optimization, a child runs the int3 site normally.
func TestLiveForkedChildOfOptimized(t *testing.T) {
	needOptimized(t)
	nop5 := target(t, "nop5")
	p, err := Attach(context.Background(), Spec{Path: nop5.Path, Offsets: []uint64{nop5.Offset}, Mode: uapi.AttachMulti, Pid: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if ws := forkRunSite(t, nop5.PC); !ws.Exited() || ws.ExitStatus() != 0 {
		t.Errorf("child forked before the first hit: %v, want a normal exit", ws)
	}
	callLoop(nop5.PC, 1)
	if b := memByte(t, nop5.PC); b != 0xe8 {
		t.Fatalf("site holds %#x after a hit, want a call", b)
	}
	ws := forkRunSite(t, nop5.PC)
	t.Logf("child of the optimized process: signaled %v, signal %v", ws.Signaled(), ws.Signal())
	if !ws.Signaled() || ws.Signal() != syscall.SIGSEGV {
		t.Errorf("child: %v, want killed by SIGSEGV", ws)
	}
	callLoop(nop5.PC, 3)
	if hits, err := p.Hits(); err != nil || hits != 1+3 {
		t.Errorf("parent hits %d (%v), want 4: the first and three optimized", hits, err)
	}
}

// The helper of TestLiveRemoteUnregisterRestores, run as a re-execution
// of this test binary: it maps the code file (MMLAB_UPROBE_CODE) r-x at
// remoteCodeAt, says "ready" on stdout and calls its nop5 site until
// killed.
const remoteCodeAt = 0x100000000000

func TestLiveHelperCallLoop(t *testing.T) {
	path := os.Getenv("MMLAB_UPROBE_CODE")
	if path == "" {
		t.Skip("helper process only")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, e := unix.Syscall6(unix.SYS_MMAP, remoteCodeAt, 4096, unix.PROT_READ|unix.PROT_EXEC,
		unix.MAP_PRIVATE|unix.MAP_FIXED_NOREPLACE, f.Fd(), 0); e != 0 {
		t.Fatal(e)
	}
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
	os.Stdout.WriteString("ready\n")
	for {
		callLoop(remoteCodeAt+codeSite, 1000)
	}
}

// A uprobe detached by a process other than the probed one, which has no
// trampoline at that address, restores the optimized site (the text of
// v6.19's __in_uprobe_trampoline() looks in current->mm and would leave the
// call), and the probed process runs on. The model does the same
// (uprobes.TestRemoteUnregisterRestores).
func TestLiveRemoteUnregisterRestores(t *testing.T) {
	needOptimized(t)
	for _, l := range readMaps(t) {
		if l.start <= remoteCodeAt+4096 && remoteCodeAt+4096 < l.end {
			t.Skipf("this process maps %s where the helper's trampoline goes", l.line)
		}
	}
	codePath := writeCodeFile(t)
	cmd, _ := startHelper(t, "TestLiveHelperCallLoop", "ready", "MMLAB_UPROBE_CODE="+codePath)
	pid := cmd.Process.Pid
	p, err := Attach(context.Background(), Spec{Path: codePath, Offsets: []uint64{codeSite}, Mode: uapi.AttachMulti, Pid: pid})
	if err != nil {
		t.Fatal(err)
	}
	site := func() []byte {
		b := make([]byte, 5)
		if err := readAt("/proc/"+strconv.Itoa(pid)+"/mem", b, remoteCodeAt+codeSite); err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i := 0; ; i++ {
		if hits, _ := p.Hits(); hits > 1 && site()[0] == 0xe8 {
			break
		}
		if i == 1000 {
			p.Close()
			t.Fatalf("the helper's site was not optimized: % x", site())
		}
		time.Sleep(time.Millisecond) // waiting for another process, not forcing an interleaving
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	got := site()
	t.Logf("helper's site after the detach: % x", got)
	if !bytes.Equal(got, []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}) {
		t.Errorf("site % x after a remote detach, want the nop5 restored", got)
	}
	var ws syscall.WaitStatus
	if wpid, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); wpid != 0 {
		t.Errorf("helper ended: %v", ws)
	}
}
