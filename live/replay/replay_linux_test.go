package replay

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"mmlab/machine"
	"mmlab/trace"
)

var update = flag.Bool("update", false, "rewrite testdata/traces/*.golden from the live kernel")

const goldenDir = "../../testdata/traces"

func parse(t *testing.T, src string) *trace.Program {
	t.Helper()
	p, err := trace.Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// isolate points TMPDIR at a fresh directory, so the test can check that Run
// leaves no file behind, and returns it.
func isolate(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	return dir
}

// checkClean fails if a helper process of ours is left (alive or zombie) or
// a file is left in tmp.
func checkClean(t *testing.T, tmp string) {
	t.Helper()
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
	for _, p := range ourHelpers(t) {
		t.Errorf("helper process left behind: %s", p)
	}
}

// ourHelpers lists the helper processes (alive or zombie) whose parent is
// this process. As Run makes this process a child subreaper, any surviving
// descendant of a helper has either a surviving helper or this process as
// parent, so an empty list means none is left.
func ourHelpers(t *testing.T) []string {
	bin, err := helperPath()
	if err != nil {
		t.Fatal(err)
	}
	comm := filepath.Base(bin)[:15] // the kernel keeps 15 bytes of comm
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := os.Getpid()
	var found []string
	for _, st := range procs {
		b, err := os.ReadFile(st)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(s[j+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if s[i+1:j] == comm && ppid == me {
			found = append(found, strings.TrimSpace(s[:j+3]))
		}
	}
	return found
}

// The goldens, recorded from this runner, replay to the same output (dev and
// inode aside). With -update they are rewritten.
func TestGoldens(t *testing.T) {
	traces, err := filepath.Glob(filepath.Join(goldenDir, "*.trace"))
	if err != nil || len(traces) == 0 {
		t.Fatalf("no golden traces in %s: %v", goldenDir, err)
	}
	tmp := isolate(t)
	for _, path := range traces {
		name := strings.TrimSuffix(filepath.Base(path), ".trace")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			golden, err := trace.GoldenPath(path, src, machine.Host().Features)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			var out bytes.Buffer
			if err := Run(context.Background(), parse(t, string(src)), &out); err != nil {
				t.Fatal(err)
			}
			if *update {
				if old, err := os.ReadFile(golden.Path); err == nil && trace.Diff(string(old), out.String()) == "" {
					return // only device and inode numbers differ
				}
				if err := os.WriteFile(golden.Path, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden.Path)
			if err != nil && golden.Setting != "" {
				t.Skipf("no golden recorded on a host of this kind (%s) yet: record it with go test ./live/replay -run TestGoldens -update", golden.Setting)
			}
			if err != nil {
				t.Fatalf("%v (record it with go test ./live/replay -run TestGoldens -update)", err)
			}
			if d := trace.Diff(string(want), out.String()); d != "" {
				t.Errorf("live output differs from %s:\n%s", golden.Path, d)
			}
		})
	}
	checkClean(t, tmp)
}

var outputLine = regexp.MustCompile(`^(|peek 0x[0-9a-f]+ \d+|error \d+ (E[A-Z0-9]+|notret|SIGSEGV SEGV_(MAPERR|ACCERR|PKUERR)|SIGBUS BUS_ADRERR)|[0-9a-f]{8,}-[0-9a-f]{8,} [r-][w-][x-][ps] [0-9a-f]{8} [0-9a-f]{2}:[0-9a-f]{2} \d+ +.*)$`)

// checkOutput checks that out holds only the lines trace.Language allows, with
// file names as bare NAMEs and no maps line outside the arena.
func checkOutput(t *testing.T, p *trace.Program, out string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !outputLine.MatchString(l) {
			t.Errorf("not an output line: %q", l)
			continue
		}
		if strings.Contains(l, "/") && !strings.HasSuffix(l, " /dev/zero (deleted)") {
			t.Errorf("a path in a maps line: %q", l)
		}
		if strings.Contains(l, " rw") || strings.Contains(l, " r-") || strings.Contains(l, " -") {
			var lo, hi uint64
			if _, err := fmt.Sscanf(l, "%x-%x", &lo, &hi); err == nil && (hi <= p.ArenaLo || lo >= p.ArenaHi) {
				t.Errorf("maps line outside the arena: %q", l)
			}
		}
	}
}

// 200 generated traces run on the live kernel without a runner error, print
// only well-formed lines, and leave nothing behind. (Comparing them with the
// model is the differential test's job.)
func TestGenerated(t *testing.T) {
	tmp := isolate(t)
	n := 200
	if testing.Short() {
		n = 20
	}
	errs, peeks, maps := 0, 0, 0
	for seed := range int64(n) {
		p := trace.Generate(seed, trace.GenOptions{})
		var out bytes.Buffer
		if err := Run(context.Background(), p, &out); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, p)
		}
		checkOutput(t, p, out.String())
		errs += strings.Count(out.String(), "error ")
		peeks += strings.Count(out.String(), "peek ")
		maps += strings.Count(out.String(), "\n\n")
	}
	t.Logf("%d traces: %d error lines, %d peeks, %d maps", n, errs, peeks, maps)
	if peeks == 0 || errs == 0 || maps == 0 {
		t.Errorf("generated traces never peek, fail or print maps")
	}
	checkClean(t, tmp)
}

// Output lines are streamed in trace order across fork and exit, and errno
// numbers become names.
func TestForkOrderAndErrnoNames(t *testing.T) {
	tmp := isolate(t)
	p := parse(t, `mmap 0x100000000000 4K rw- private,fixed
poke 0x100000000000 1
fork
peek 0x100000000000
fork
mmap 0x100000000000 4K rw- private,noreplace
exit
munmap 0x100000000010 4K
exit
peek 0x100000000000
`)
	var out bytes.Buffer
	if err := Run(context.Background(), p, &out); err != nil {
		t.Fatal(err)
	}
	// The values are those the trace wrote; EEXIST and EINVAL are the
	// documented errors of MAP_FIXED_NOREPLACE over a mapping and of an
	// unaligned munmap.
	want := "peek 0x100000000000 1\nerror 6 EEXIST\nerror 8 EINVAL\npeek 0x100000000000 1\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	checkClean(t, tmp)
}

// busyArena rewrites the helper's arena to one that holds its stack wherever
// ASLR put it (no trace may have it).
func busyArena(in []byte) []byte {
	_, rest, _ := bytes.Cut(in, []byte("\n"))
	return append([]byte(fmt.Sprintf("arena %d %d\n", uint64(trace.StackZoneLo), uint64(trace.MaxUserAddr))), rest...)
}

// A helper that finds its own stack in the arena prints nothing, and Run
// runs the trace again in a fresh process, where it prints the whole output
// once.
func TestBusyArenaRunsAgain(t *testing.T) {
	tmp := isolate(t)
	attempts := 0
	setInputHook(t, func(attempt int, in []byte) []byte {
		attempts = attempt + 1
		if attempt < 2 {
			return busyArena(in)
		}
		return in
	})
	p := parse(t, "file f 4K\nmmap 0x100000000000 4K r-- private,fixed f 0\npeek 0x100000000001\n")
	var out bytes.Buffer
	if err := Run(context.Background(), p, &out); err != nil {
		t.Fatal(err)
	}
	if attempts != 3 || out.String() != "peek 0x100000000001 1\n" {
		t.Errorf("%d attempts, output %q; want 3 and the peek once", attempts, out.String())
	}
	checkClean(t, tmp)
}

// When every helper process finds its stack in the arena, Run says so and
// leaves nothing behind.
func TestBusyArenaGivesUp(t *testing.T) {
	tmp := isolate(t)
	setInputHook(t, func(_ int, in []byte) []byte { return busyArena(in) })
	p := parse(t, "file f 4K\nfork\nmaps\n")
	var out bytes.Buffer
	err := Run(context.Background(), p, &out)
	if err == nil || !strings.Contains(err.Error(), "in 10 processes in a row, the arena held the helper's own") ||
		!strings.Contains(err.Error(), "[stack]") || out.Len() != 0 {
		t.Fatalf("Run = %v, output %q; want the busy arena named, no output", err, out.String())
	}
	checkClean(t, tmp)
}

// A Program that did not come from Parse is validated all the same: nothing
// outside the arena reaches a system call.
func TestRunValidates(t *testing.T) {
	p := parse(t, "mmap 0x100000000000 4K rw- private,fixed\n")
	p.Ops[0].Addr = 0x7f0000000000
	err := Run(context.Background(), p, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "line 1 (mmap 0x7f0000000000 4K rw- private,fixed)") || !strings.Contains(err.Error(), "outside the arena") {
		t.Errorf("Run of an op outside the arena: %v", err)
	}
}

// cancelWriter cancels the run at the first line it receives.
type cancelWriter struct {
	t       *testing.T
	cancel  context.CancelFunc
	buf     bytes.Buffer
	running []string // our helper processes at the first line
}

func (w *cancelWriter) Write(b []byte) (int, error) {
	if w.running == nil {
		w.running = ourHelpers(w.t)
	}
	w.cancel()
	return w.buf.Write(b)
}

// Cancelling mid-trace (Ctrl-C) kills the helper and its forked children and
// removes the files. The trace is provably still running at the cancel: it
// prints far more than the pipe and the helper's buffer hold, and Run stops
// reading at the first line after the cancel.
func TestCancelMidTrace(t *testing.T) {
	tmp := isolate(t)
	var src strings.Builder
	src.WriteString("file f 8K\nmmap 0x100000000000 8K rw- shared,fixed f 0\nfork\nfork\npeek 0x100000000000\n")
	for range 5000 {
		src.WriteString("maps\n")
	}
	src.WriteString("exit\nexit\npeek 0x100000000001\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelWriter{t: t, cancel: cancel}
	err := Run(ctx, parse(t, src.String()), w)
	if len(w.running) == 0 {
		t.Error("no helper process seen running before the cancel: the leftover check sees nothing")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if w.buf.Len() >= 5000*70 || strings.Contains(w.buf.String(), "peek 0x100000000001") {
		t.Errorf("the trace ran to its end (%d bytes)", w.buf.Len())
	}
	checkClean(t, tmp)
}

// The helper is built once into the user's cache directory, under a name
// keyed by its source; without a C compiler Run says how to get one.
func TestHelperBuild(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	bin, err := helperPath()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(bin) != filepath.Join(cache, "mmlab") || !strings.HasPrefix(filepath.Base(bin), "replay-helper-") {
		t.Errorf("helper built at %s, want %s/mmlab/replay-helper-HASH", bin, cache)
	}
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	again, err := helperPath()
	if err != nil || again != bin {
		t.Fatalf("second helperPath = %q, %v", again, err)
	}
	if st2, _ := os.Stat(bin); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("the cached helper was rebuilt")
	}
	ents, _ := os.ReadDir(filepath.Join(cache, "mmlab"))
	if len(ents) != 1 {
		t.Errorf("cache holds %d entries, want only the helper", len(ents))
	}

	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	tmp := isolate(t)
	err = Run(context.Background(), parse(t, "maps\n"), io.Discard)
	if !errors.Is(err, ErrNoCompiler) || !strings.Contains(err.Error(), "C compiler (cc): install gcc") {
		t.Errorf("Run without a compiler: %v", err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("Run without a compiler left %s", ents[0].Name())
	}
}

// BenchmarkRunGenerated replays a default-size generated trace (40 ops, a
// few forks) on the live kernel: process start, files, ops and cleanup.
func BenchmarkRunGenerated(b *testing.B) {
	p := trace.Generate(1, trace.GenOptions{})
	for b.Loop() {
		if err := Run(context.Background(), p, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunMaps is the cost of one maps op in the helper (reading
// /proc/self/maps and filtering it) over a long trace.
func BenchmarkRunMaps(b *testing.B) {
	src := "mmap 0x100000000000 8K rw- private,fixed\n" + strings.Repeat("maps\n", 1000)
	p, err := trace.Parse(strings.NewReader(src))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := Run(context.Background(), p, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// With an unlimited stack rlimit, mmap_base() would put the helper's
// libraries 5/6 of the address space below TASK_SIZE, in this arena, every
// time; the helper lowers the rlimit and runs again, so the trace runs.
func TestHelperUnlimitedStack(t *testing.T) {
	tmp := isolate(t)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &old); err != nil {
		t.Fatal(err)
	}
	unlimited := syscall.Rlimit{Cur: unix.RLIM_INFINITY, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_STACK, &unlimited); err != nil {
		t.Skip(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_STACK, &old)
	p := parse(t, "arena 0x50000000000 0x160000000000\nmaps\n")
	var out bytes.Buffer
	if err := Run(context.Background(), p, &out); err != nil || out.String() != "\n" {
		t.Errorf("Run = %v, output %q; want an empty maps", err, out.String())
	}
	checkClean(t, tmp)
}
