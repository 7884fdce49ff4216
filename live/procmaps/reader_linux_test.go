package procmaps

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"mmlab/uapi"

	"golang.org/x/sys/unix"

	"mmlab/live"
)

// The test binary re-executes itself in a child mode chosen by this variable.
const childEnv = "MMLAB_PROCMAPS_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "hold":
		// Map N alternating RW/R pages, say "ready", and wait for stdin to close.
		n, _ := strconv.Atoi(os.Getenv("MMLAB_PROCMAPS_N"))
		if _, err := mapAlternating(n); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "open":
		// Try to read another process's maps and print the error.
		pid, _ := strconv.Atoi(os.Getenv("MMLAB_PROCMAPS_PID"))
		r, err := Open(pid)
		if err == nil {
			err = r.Walk(func(*uapi.VMA) bool { return true })
		}
		fmt.Print(err)
		os.Exit(0)
	}
	os.Exit(2)
}

// namesPidErrno reports whether err is e and its message names the process
// and the errno's name.
func namesPidErrno(err error, pid int, e unix.Errno) bool {
	return errors.Is(err, e) && strings.Contains(err.Error(), fmt.Sprintf("process %d ", pid)) &&
		strings.Contains(err.Error(), unix.ErrnoName(e))
}

// mapAlternating maps n pages whose protections alternate RW, R, so that the
// kernel keeps n VMAs (neighbours with different flags never merge). It
// returns the region.
func mapAlternating(n int) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	ps := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, n*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	for i := 1; i < n; i += 2 {
		if err := unix.Mprotect(mem[i*ps:(i+1)*ps], unix.PROT_READ); err != nil {
			return nil, err
		}
	}
	return mem, nil
}

// holder is a child process holding n VMAs until it is stopped.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startHolder(t testing.TB, n int) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=hold", "MMLAB_PROCMAPS_N="+strconv.Itoa(n))
	stdin, stdout, err := live.StartPiped(cmd)
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(h.stop)
	line, err := stdout.ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("holder child: %q, %v", line, err)
	}
	return h
}

func (h *holder) pid() int { return h.cmd.Process.Pid }

// stop kills the child and reaps it; it may be called more than once.
func (h *holder) stop() {
	if h.cmd.ProcessState != nil {
		return
	}
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// freeze stops the child with SIGSTOP and waits until every thread of it
// has stopped, so that its mappings (the Go runtime's among them) cannot
// change until it is killed.
func (h *holder) freeze(t testing.TB) { h.signalAndWait(t, unix.SIGSTOP, unix.WSTOPPED) }

// killNoReap kills the child and waits until it is a zombie, without reaping
// it: its mm is gone but its pid still exists.
func (h *holder) killNoReap(t testing.TB) { h.signalAndWait(t, unix.SIGKILL, unix.WEXITED) }

// signalAndWait sends the child sig and waits, without consuming the
// report (WNOWAIT), until waitid(2) reports the state event: WSTOPPED once
// the whole group has stopped, WEXITED once it is a zombie.
func (h *holder) signalAndWait(t testing.TB, sig unix.Signal, event int) {
	t.Helper()
	if err := unix.Kill(h.pid(), sig); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, h.pid(), &info, event|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
}

func open(t testing.TB, pid int) *Reader {
	t.Helper()
	r, err := Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func walkText(r *Reader, walk func(func(*uapi.VMA) bool) error) ([]byte, error) {
	var out []byte
	err := walk(func(v *uapi.VMA) bool {
		out = v.AppendText(out)
		return true
	})
	return out, err
}

// dropGate removes the gate VMA's line, which only the text has.
func dropGate(text []byte) []byte {
	var out []byte
	for line := range bytes.Lines(text) {
		if !bytes.HasSuffix(line, []byte(" [vsyscall]\n")) {
			out = append(out, line...)
		}
	}
	return out
}

// compareWithKernel checks that both walks of pid re-create /proc/PID/maps
// byte for byte (the query walk without [vsyscall]). A process may change
// its mappings meanwhile, so a comparison counts only if the file read the
// same before and after the walks. A process can also change a mapping and
// change it back between the two reads (another test's modifier loop), so
// a difference is reported only if none of five tries matches and the file
// then reads the same 50 times more. It reports whether a stable
// comparison was made.
func compareWithKernel(t *testing.T, pid int) bool {
	t.Helper()
	path := "/proc/" + strconv.Itoa(pid) + "/maps"
	r, err := Open(pid)
	if err != nil {
		return false // gone, or a kernel thread race
	}
	defer r.Close()
	var diffs []string
	for range 5 {
		before, err := os.ReadFile(path)
		if err != nil || len(before) == 0 {
			return false // exited, or a kernel thread (no mm)
		}
		text, err1 := walkText(r, r.Walk)
		query, err2 := walkText(r, r.WalkQuery)
		after, _ := os.ReadFile(path)
		if !bytes.Equal(before, after) {
			continue
		}
		if err1 != nil || err2 != nil {
			t.Errorf("pid %d: Walk: %v, WalkQuery: %v", pid, err1, err2)
			return true
		}
		diffs = diffs[:0]
		if !bytes.Equal(text, before) {
			diffs = append(diffs, fmt.Sprintf("Walk text differs from %s:\n got %q\nwant %q", path, text, before))
		}
		if want := dropGate(before); !bytes.Equal(query, want) {
			diffs = append(diffs, fmt.Sprintf("WalkQuery text differs from %s without [vsyscall]:\n got %q\nwant %q", path, query, want))
		}
		if len(diffs) == 0 {
			return true
		}
		if changing(path, before) {
			diffs = nil
		}
	}
	for _, d := range diffs {
		t.Errorf("pid %d: %s", pid, d)
	}
	return diffs != nil
}

// changing reports whether one of 50 more reads of path differs from text.
func changing(path string, text []byte) bool {
	for range 50 {
		if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, text) {
			return true
		}
	}
	return false
}

// Every process on the machine: the re-created text must equal the kernel's.
func TestTextMatchesKernelAllProcesses(t *testing.T) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if compareWithKernel(t, pid) {
			compared++
		}
	}
	t.Logf("compared %d processes", compared)
	if compared < 3 {
		t.Fatalf("only %d processes could be compared", compared)
	}
}

// Names the text escapes or decorates: a newline and spaces in a path, a
// deleted file, an anonymous VMA named by prctl, a shared mapping, a file
// offset. This process maps them; both walks must match the kernel's text.
func TestOddNames(t *testing.T) {
	dir := t.TempDir()
	ps := os.Getpagesize()
	mapFile := func(name string, pages, offPages int, shared bool) []byte {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, 8*ps), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		flags := unix.MAP_PRIVATE
		if shared {
			flags = unix.MAP_SHARED
		}
		mem, err := unix.Mmap(int(f.Fd()), int64(offPages*ps), pages*ps, unix.PROT_READ, flags)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(mem) })
		return mem
	}
	nl := mapFile("new\nline", 1, 0, false)
	mapFile("with space", 2, 3, true)
	mapFile("deleted", 1, 0, false)
	if err := os.Remove(filepath.Join(dir, "deleted")); err != nil {
		t.Fatal(err)
	}
	anon, err := unix.Mmap(-1, 0, ps, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(anon) })
	anonName := []byte("mmlab test\x00")
	named := true
	if err := unix.Prctl(unix.PR_SET_VMA, unix.PR_SET_VMA_ANON_NAME, uintptr(unsafe.Pointer(&anon[0])), uintptr(ps), uintptr(unsafe.Pointer(&anonName[0]))); err != nil {
		named = false
		t.Logf("PR_SET_VMA_ANON_NAME: %v (kernel without CONFIG_ANON_VMA_NAME: [anon:] names not covered)", err)
	}

	if !compareWithKernel(t, os.Getpid()) {
		t.Fatal("this process's maps never read the same twice")
	}
	r := open(t, os.Getpid())
	v, err := r.Lookup(uint64(uintptr(unsafe.Pointer(&nl[0]))))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, `new\012line`); string(v.Name) != want {
		t.Errorf("Lookup name = %q, want %q", v.Name, want)
	}
	text, err := walkText(r, r.Walk)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`new\012line`, "with space\n", "deleted (deleted)\n", "[anon:mmlab test]\n"} {
		if !bytes.Contains(text, []byte(want)) && (named || want != "[anon:mmlab test]\n") {
			t.Errorf("maps text lacks %q", want)
		}
	}
}

func TestLookup(t *testing.T) {
	mem, err := mapAlternating(3)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	ps := uint64(os.Getpagesize())
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	r := open(t, os.Getpid())

	// The middle page is its own VMA, read-only, anonymous, unnamed.
	check := func(r *Reader, how string) {
		v, err := r.Lookup(base + ps + 100)
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if v.Start != base+ps || v.End != base+2*ps || v.Flags != uapi.PROCMAP_QUERY_VMA_READABLE || v.Inode != 0 || v.Name != nil {
			t.Errorf("%s: Lookup = %+v, want [%#x, %#x) r--p", how, v, base+ps, base+2*ps)
		}
	}
	check(r, "ioctl")
	if v, _ := r.Lookup(base); v.PageSize != ps {
		t.Errorf("PageSize = %d, want %d", v.PageSize, ps)
	}

	// Unmap the middle page: the lookup fails with ENOENT, naming pid and errno.
	if err := unix.MunmapPtr(unsafe.Pointer(&mem[ps]), uintptr(ps)); err != nil {
		t.Fatal(err)
	}
	_, err = r.Lookup(base + ps)
	if !namesPidErrno(err, os.Getpid(), unix.ENOENT) {
		t.Errorf("Lookup of a hole: %v, want ENOENT naming the pid", err)
	}
	if _, err := unix.MmapPtr(-1, 0, unsafe.Pointer(&mem[ps]), uintptr(ps), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED); err != nil {
		t.Fatal(err)
	}

	// A kernel before 6.11 answers ENOTTY: Lookup scans the text and gets the same.
	old := open(t, os.Getpid())
	calls := 0
	old.query = func(int, *uapi.ProcmapQuery, []byte) error { calls++; return unix.ENOTTY }
	check(old, "text fallback")
	if !old.noQuery || calls == 0 {
		t.Errorf("fallback not taken: noQuery=%v calls=%d", old.noQuery, calls)
	}
	_, err = old.Lookup(1 << 20)
	if !namesPidErrno(err, os.Getpid(), unix.ENOENT) || !strings.Contains(err.Error(), "scan of /proc/") {
		t.Errorf("text fallback Lookup of a hole: %v", err)
	}
	if err := old.WalkQuery(func(*uapi.VMA) bool { return true }); !namesPidErrno(err, os.Getpid(), unix.ENOTTY) {
		t.Errorf("WalkQuery without the ioctl: %v", err)
	}
}

// A name longer than the buffer makes the kernel answer ENAMETOOLONG; the
// reader grows the buffer and asks again. A name longer than PATH_MAX can
// never come back through the ioctl: that is an error naming ENAMETOOLONG,
// while the text shows the whole path.
func TestNameTooLong(t *testing.T) {
	dir := t.TempDir()
	ps := os.Getpagesize()
	// Directories of 200 characters, nested 25 deep: a path of over 5000 bytes.
	dfd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	comp := strings.Repeat("d", 200)
	var mems [][]byte
	for depth := 1; depth <= 25; depth++ {
		if err := unix.Mkdirat(dfd, comp, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(dfd, comp, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(dfd)
		dfd = next
		if depth == 5 || depth == 25 { // about 1000 and 5000 bytes
			fd, err := unix.Openat(dfd, "f", unix.O_CREAT|unix.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			unix.Ftruncate(fd, int64(ps))
			mem, err := unix.Mmap(fd, 0, ps, unix.PROT_READ, unix.MAP_SHARED)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Munmap(mem)
			mems = append(mems, mem)
		}
	}
	unix.Close(dfd)
	r := open(t, os.Getpid())
	r.name = make([]byte, 8)
	v, err := r.Lookup(uint64(uintptr(unsafe.Pointer(&mems[0][0]))))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(v.Name, []byte(dir)) || !bytes.HasSuffix(v.Name, []byte("/f")) || len(r.name) < len(v.Name)+1 {
		t.Errorf("after growing to %d bytes: name %q", len(r.name), v.Name)
	}
	_, err = r.Lookup(uint64(uintptr(unsafe.Pointer(&mems[1][0]))))
	if !namesPidErrno(err, os.Getpid(), unix.ENAMETOOLONG) {
		t.Errorf("Lookup of a name over PATH_MAX: %v, want ENAMETOOLONG", err)
	}
	if len(r.name) != pathMax {
		t.Errorf("name buffer %d bytes, want PATH_MAX %d", len(r.name), pathMax)
	}
	text, err := walkText(r, r.Walk)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(text, []byte(strings.Repeat(comp+"/", 25)+"f\n")) {
		t.Error("the text walk lacks the path longer than PATH_MAX")
	}
}

func TestNoSuchProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid // reaped: no such process (barring pid reuse)
	for _, p := range []int{pid, -1} {
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("process %d does not exist", p)) ||
			!(namesPidErrno(err, p, unix.ENOENT) || namesPidErrno(err, p, unix.ESRCH)) {
			t.Errorf("Open(%d) = %v", p, err)
		}
	}
}

// An unprivileged process (uid nobody) may not read the maps of this root
// process: ptrace_may_access fails at open with EACCES.
func TestPermissionDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process as another user")
	}
	// The child runs a copy of this binary that uid 65534 can execute.
	dir, err := os.MkdirTemp("", "procmaps")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "procmaps.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=open", "MMLAB_PROCMAPS_PID="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v %s", err, out)
	}
	want := fmt.Sprintf("procmaps: process %d cannot be read: permission denied (open /proc/%d/maps: EACCES)", os.Getpid(), os.Getpid())
	if string(out) != want {
		t.Errorf("child says %q\nwant        %q", out, want)
	}
}

// A process that exits during a walk. Reaped, its pid is gone and the next
// read fails with ESRCH; a zombie still has its pid but no mm, and the read
// just ends (EOF), which only the liveness check tells from a complete walk.
func TestExitDuringWalk(t *testing.T) {
	for _, c := range []struct {
		name  string
		reap  bool
		noIoc bool
		query bool
	}{
		{"text/reaped", true, false, false},
		{"text/zombie", false, false, false},
		{"text/zombie/no-ioctl", false, true, false},
		{"query/reaped", true, false, true},
		{"query/zombie", false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := startHolder(t, 400) // several 4 KiB read chunks
			r := open(t, h.pid())
			if c.noIoc {
				r.query = func(int, *uapi.ProcmapQuery, []byte) error { return unix.ENOTTY }
			}
			walk := r.Walk
			if c.query {
				walk = r.WalkQuery
			}
			seen := 0
			err := walk(func(*uapi.VMA) bool {
				if seen++; seen == 1 {
					if c.reap {
						h.stop()
					} else {
						h.killNoReap(t)
					}
				}
				return true
			})
			want := fmt.Sprintf("procmaps: process %d exited during the walk", h.pid())
			if !errors.Is(err, unix.ESRCH) || !strings.HasPrefix(fmt.Sprint(err), want) || !strings.Contains(err.Error(), "ESRCH") {
				t.Fatalf("after %d VMAs: %v, want %q... ESRCH", seen, err, want)
			}
			if seen > 200 {
				t.Errorf("saw %d VMAs of a process that exited after the first", seen)
			}
			// A lookup afterwards says the process has exited.
			if !c.noIoc {
				_, err = r.Lookup(0x400000)
				if !namesPidErrno(err, h.pid(), unix.ESRCH) || !strings.Contains(err.Error(), "has exited") {
					t.Errorf("Lookup after exit: %v", err)
				}
			}
		})
	}
}

// A holder's maps read the same whichever walk, with its 1000 extra VMAs.
func TestWalksAgreeOnHolder(t *testing.T) {
	h := startHolder(t, 1000)
	r := open(t, h.pid())
	n := 0
	if err := r.Walk(func(*uapi.VMA) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Errorf("Walk saw %d VMAs, want at least the 1000 mapped", n)
	}
	if !compareWithKernel(t, h.pid()) {
		t.Fatal("an idle holder's maps changed")
	}
	// Stopping early stops: one VMA, and no error.
	n = 0
	if err := r.Walk(func(*uapi.VMA) bool { n++; return false }); err != nil || n != 1 {
		t.Errorf("early stop: %d VMAs, %v", n, err)
	}
}

// A kernel thread has no mm: its maps file is empty, and so are both walks,
// without an error; a lookup says what it is.
func TestKernelThread(t *testing.T) {
	if !isKernelThread(2) {
		t.Skip("pid 2 is not kthreadd here (a pid namespace?)")
	}
	r := open(t, 2)
	for name, walk := range map[string]func(func(*uapi.VMA) bool) error{"Walk": r.Walk, "WalkQuery": r.WalkQuery} {
		n := 0
		if err := walk(func(*uapi.VMA) bool { n++; return true }); err != nil || n != 0 {
			t.Errorf("%s: %d VMAs, %v", name, n, err)
		}
	}
	if _, err := r.Lookup(0x400000); !namesPidErrno(err, 2, unix.ESRCH) || !strings.Contains(err.Error(), "kernel thread") {
		t.Errorf("Lookup: %v", err)
	}
	if isKernelThread(os.Getpid()) {
		t.Error("this process is not a kernel thread")
	}
}

// A zombie's maps file opens (the pid exists) but has no mm behind it: a
// walk of it says the process exited.
func TestZombieAtOpen(t *testing.T) {
	h := startHolder(t, 0)
	h.killNoReap(t)
	r := open(t, h.pid())
	for name, walk := range map[string]func(func(*uapi.VMA) bool) error{"Walk": r.Walk, "WalkQuery": r.WalkQuery} {
		err := walk(func(*uapi.VMA) bool { return true })
		if !errors.Is(err, unix.ESRCH) || !strings.Contains(err.Error(), fmt.Sprintf("process %d exited", h.pid())) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// With a buffer smaller than a line, every read() returns part of a line
// (seq_file keeps the rest for the next): the walk must join the pieces and
// grow the buffer, and still re-create the text exactly. The holder is
// stopped so that its maps read the same both times.
func TestSmallBufferSplitsLines(t *testing.T) {
	h := startHolder(t, 50)
	h.freeze(t)
	r := open(t, h.pid())
	r.buf = make([]byte, 7)
	got, err := walkText(r, r.Walk)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", h.pid()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if len(r.buf) <= 7 {
		t.Errorf("buffer did not grow: %d bytes", len(r.buf))
	}
}

// gnuBuildID finds the build ID of an ELF file where the kernel looks for
// it (lib/buildid.c): an NT_GNU_BUILD_ID note named "GNU" inside a PT_NOTE
// segment. Nil if there is none.
func gnuBuildID(t *testing.T, path string) []byte {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		note, err := io.ReadAll(p.Open())
		if err != nil {
			t.Fatal(err)
		}
		for len(note) >= 12 {
			namesz, descsz, typ := binary.LittleEndian.Uint32(note), binary.LittleEndian.Uint32(note[4:]), binary.LittleEndian.Uint32(note[8:])
			name := note[12:]
			desc := name[(namesz+3)&^3:]
			if typ == 3 && string(name[:namesz]) == "GNU\x00" {
				return desc[:descsz]
			}
			note = desc[(descsz+3)&^3:]
		}
	}
	return nil
}

// PROCMAP_QUERY's build IDs are the ones the ELF files carry: for the C
// library (mapped here from its file) and this test binary. Go's linker
// puts the GNU build-ID note outside the PT_NOTE segment, where the kernel
// does not look, so for a Go binary the kernel reports none (gnuBuildID
// mirrors where the kernel looks). An anonymous VMA has none.
func TestBuildID(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := open(t, os.Getpid())
	code := uint64(reflect.ValueOf(TestBuildID).Pointer())
	got, err := r.BuildID(code)
	if err != nil {
		t.Fatal(err)
	}
	if want := gnuBuildID(t, exe); !bytes.Equal(got, want) {
		t.Errorf("this binary: BuildID = %x, want %x", got, want)
	}

	libc := "/usr/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skipf("no C library to map: %v", err)
	}
	want := gnuBuildID(t, libc)
	if want == nil {
		t.Fatalf("%s has no build ID in a PT_NOTE segment", libc)
	}
	f, err := os.Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	got, err = r.BuildID(uint64(uintptr(unsafe.Pointer(&mem[0]))))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s: BuildID = %x, %v, want %x", libc, got, err, want)
	}

	anon, err := mapAlternating(1)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(anon)
	if id, err := r.BuildID(uint64(uintptr(unsafe.Pointer(&anon[0])))); id != nil || err != nil {
		t.Errorf("anonymous VMA: BuildID = %x, %v", id, err)
	}
	if _, err := r.BuildID(1 << 20); !namesPidErrno(err, os.Getpid(), unix.ENOENT) {
		t.Errorf("BuildID of a hole: %v", err)
	}
}

// The kernel's answers to malformed queries, as fs/proc/task_mmu.c's
// do_procmap_query gives them: the model's PROCMAP_QUERY must give the same.
func TestRawQueryErrors(t *testing.T) {
	r := open(t, os.Getpid())
	base := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryFlags: uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA}
	for _, c := range []struct {
		name   string
		modify func(q *uapi.ProcmapQuery)
		want   error
	}{
		{"fine", func(q *uapi.ProcmapQuery) {}, nil},
		{"size > PAGE_SIZE", func(q *uapi.ProcmapQuery) { q.Size = uint64(os.Getpagesize()) + 1 }, unix.E2BIG},
		{"size short of query_addr", func(q *uapi.ProcmapQuery) { q.Size = 23 }, unix.EINVAL},
		{"unknown flag", func(q *uapi.ProcmapQuery) { q.QueryFlags |= 0x40 }, unix.EINVAL},
		{"name size without address", func(q *uapi.ProcmapQuery) { q.VMANameSize = 16 }, unix.EINVAL},
		{"build ID address without size", func(q *uapi.ProcmapQuery) { q.BuildIDAddr = 0x1000 }, unix.EINVAL},
		{"no VMA above", func(q *uapi.ProcmapQuery) { q.QueryAddr = 1 << 47 }, unix.ENOENT},
		{"no covering VMA", func(q *uapi.ProcmapQuery) { q.QueryFlags = 0; q.QueryAddr = 0 }, unix.ENOENT},
		{"file-backed only", func(q *uapi.ProcmapQuery) { q.QueryFlags |= uapi.PROCMAP_QUERY_FILE_BACKED_VMA }, nil},
	} {
		q := base
		c.modify(&q)
		if err := r.RawQuery(&q); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A struct of 24 bytes (up to query_addr) is accepted, and only those
	// bytes are written back: the rest of ours stays as it was.
	q := base
	q.Size = 24
	q.VMAStart = 0xdead
	if err := r.RawQuery(&q); err != nil || q.VMAStart != 0xdead {
		t.Errorf("24-byte query: %v, vma_start %#x (want untouched 0xdead)", err, q.VMAStart)
	}
	// Asked for file-backed VMAs only, it finds one with an inode.
	q = base
	q.QueryFlags |= uapi.PROCMAP_QUERY_FILE_BACKED_VMA
	if err := r.RawQuery(&q); err != nil || q.Inode == 0 || q.VMAPageSize != uint64(os.Getpagesize()) {
		t.Errorf("file-backed query: %v, %+v", err, q)
	}
}
