package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"mmlab/live"
	"mmlab/live/tracefs"
)

// An experiment's short live run, and what its kill points may be: on a
// progress line, or the first moment after one that the run is inside a
// uprobe attach or detach (as its threads' kernel stacks say).
type experiment struct {
	name  string
	args  []string
	kinds []phase
}

type phase string

const (
	onLine   phase = "on the line"
	inAttach phase = "in an attach"
	inDetach phase = "in a detach"
	inTrace  phase = "with an ftrace instance"
	ended    phase = "(not killed: the run ended first)"
)

var (
	uprobeKinds = []phase{onLine, inAttach, inDetach}
	experiments = []experiment{
		{"forkstall", []string{"--runs", "1", "--size", "64M", "--cases", "busy-maps", "--modes", "multi-1,perf-4"}, uprobeKinds},
		{"redzone", []string{"--calls", "200", "--samples", "5"}, uprobeKinds},
		{"mapslock", []string{"--runs", "3", "--size", "64M"}, []phase{onLine}},
		{"mapscan", []string{"--runs", "1", "--duration", "100ms"}, []phase{onLine, inTrace}},
		{"maptear", []string{"--reads", "200", "--duration", "300ms"}, []phase{onLine}},
		{"trigger", []string{"--cpus", "1,2", "--cases", "uprobe-nop,uretprobe-nop", "--warmup", "0s", "--duration", "100ms", "--interval", "50ms"}, uprobeKinds},
		{"attach", []string{"--n", "1,4", "--runs", "2"}, uprobeKinds},
	}
)

// TestChaos kills each live experiment at MMLAB_CHAOS_POINTS seeded points
// (2 unless set: CI's share), and after each a second run must leave the
// machine as the test found it before the first, with valid results.
func TestChaos(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the live experiments need root")
	}
	points := 2
	if s := os.Getenv("MMLAB_CHAOS_POINTS"); s != "" {
		points, _ = strconv.Atoi(s)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MMLAB_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (MMLAB_CHAOS_SEED=%d replays it), %d points per experiment", seed, seed, points)
	// Mounted first, so that the mount a run may make is not a difference.
	if _, err := tracefs.Root(); err != nil {
		t.Logf("no tracefs: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "mmlab")
	if out, err := exec.Command("go", "build", "-o", bin, "mmlab/cmd/mmlab").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	c := &chaos{bin: bin, tmp: t.TempDir()}
	start := time.Now()
	for i, e := range experiments {
		t.Run(e.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			ref := c.complete(t, e, nil)
			t0 := time.Now()
			hit := map[phase]int{}
			// A point whose run ends before it kills nothing: another is
			// drawn, up to three times as many as asked for.
			for p := 0; p < 3*points && p-hit[ended] < points; p++ {
				kind := e.kinds[p%len(e.kinds)]
				line := rng.IntN(max(1, len(ref.lines)-1))
				if kind != onLine {
					// The first half, so that an attach or detach follows.
					line = rng.IntN(max(1, len(ref.lines)/2))
				}
				where := fmt.Sprintf("seed %d, %s point %d (%s, from line %d)", seed, e.name, p, kind, line)
				before, tmpBefore := c.snapshot(t), topOf("/tmp")
				k := c.kill(t, e, line, kind)
				left := diff(before, c.snapshot(t))
				ref = c.complete(t, e, &where)
				if gone := diff(before, c.snapshot(t)); len(gone) > 0 {
					t.Errorf("%s: left after the next run: %q", where, gone)
				}
				if ref.removed == "" && slices.ContainsFunc(left, func(s string) bool {
					return strings.HasPrefix(s, "tmp ") || strings.HasPrefix(s, "tracefs instance ")
				}) {
					t.Errorf("%s: the next run did not say it removed what the killed run left (%q)", where, left)
				}
				if d := diff(tmpBefore, topOf("/tmp")); len(d) > 0 {
					// The runs' TMPDIR is the test's; other test packages
					// running meanwhile write to /tmp too.
					t.Logf("%s: new in /tmp meanwhile (not the runs' TMPDIR): %q", where, d)
				}
				hit[k.phase]++
				t.Logf("%s: killed %s (line %d %q, %v to exit); left by the kill %q; the next run said %q",
					where, k.phase, k.lines, k.last, k.exit.Round(time.Millisecond), left, ref.removed)
			}
			kills := 0
			for ph, n := range hit {
				if ph != ended {
					kills += n
				}
			}
			t.Logf("%s: %d kills in %v: %d on a line, %d in an attach, %d in a detach, %d with an ftrace instance; %d runs ended before their point",
				e.name, kills, time.Since(t0).Round(time.Second), hit[onLine], hit[inAttach], hit[inDetach], hit[inTrace], hit[ended])
			if kills < points {
				t.Errorf("%s: %d kills, want %d", e.name, kills, points)
			}
		})
	}
	t.Logf("all: %d experiments x %d points in %v", len(experiments), points, time.Since(start).Round(time.Second))
}

type chaos struct {
	bin string
	tmp string // the runs' TMPDIR
}

func (c *chaos) command(e experiment, extra ...string) *exec.Cmd {
	args := append(append([]string{"run", e.name, "--target", "live"}, e.args...), extra...)
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+c.tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// run is what a complete run printed.
type run struct {
	lines   []string // its progress
	removed string   // its line about a dead run's leftovers
}

// complete runs e to its end and checks that it succeeded with a valid
// document and left none of its processes.
func (c *chaos) complete(t *testing.T, e experiment, where *string) run {
	t.Helper()
	cmd := c.command(e, "--json")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	sid := cmd.Process.Pid
	ctx := "the first run"
	if where != nil {
		ctx = *where + ": the next run"
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", ctx, err, stderr.String())
	}
	var doc struct {
		Experiment string            `json:"experiment"`
		Version    int               `json:"schema_version"`
		Results    []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &doc); err != nil || doc.Experiment != e.name || doc.Version < 1 || len(doc.Results) == 0 {
		t.Errorf("%s: not a valid document (%v): %.200q", ctx, err, stdout.String())
	}
	waitSession(t, sid)
	var r run
	for line := range strings.Lines(stderr.String()) {
		if strings.HasPrefix(line, "mmlab: removed") {
			r.removed = strings.TrimSpace(line)
		} else {
			r.lines = append(r.lines, strings.TrimSpace(line))
		}
	}
	return r
}

// killed is how a run was killed.
type killed struct {
	phase phase         // what its threads were doing when killed
	lines int           // progress lines seen
	last  string        // the last of them
	exit  time.Duration // from SIGKILL until reaped
}

// kill starts e and sends it SIGKILL on its line-th line of progress or,
// for an attach or detach, at the first moment after it that one is under
// way; a run that ends first is not killed. It waits until every process
// of the run's session is gone.
func (c *chaos) kill(t *testing.T, e experiment, line int, kind phase) killed {
	t.Helper()
	cmd := c.command(e)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	lines := make(chan string)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(stderr); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	var k killed
	for k.lines <= line {
		l, ok := <-lines
		if !ok {
			break
		}
		k.lines++
		k.last = l
	}
	k.phase = ended
	for more := true; more; {
		ph := phaseOf(pid)
		if kind == onLine || ph == kind {
			syscall.Kill(pid, syscall.SIGKILL)
			k.phase = ph
			break
		}
		select {
		case l, ok := <-lines:
			if ok {
				k.lines++
				k.last = l
			}
			more = ok
		default:
		}
	}
	t0 := time.Now()
	go func() {
		for range lines {
		}
	}()
	cmd.Wait()
	k.exit = time.Since(t0)
	waitSession(t, pid)
	return k
}

// phaseOf says whether a thread of process pid is inside a uprobe attach
// or detach, from its kernel stack and system call, or else whether the
// process has an ftrace instance; else onLine.
func phaseOf(pid int) phase {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		st, _ := os.ReadFile(task + "/stack")
		sc, _ := os.ReadFile(task + "/syscall")
		s, call := string(st), strings.Fields(string(sc))
		switch {
		case strings.Contains(s, "uprobe_register") || strings.Contains(s, "uprobe_multi_link_attach") ||
			len(call) > 1 && (call[0] == "321" && call[1] == "0x1c" || call[0] == "298"): // bpf(BPF_LINK_CREATE), perf_event_open
			return inAttach
		case strings.Contains(s, "uprobe_unregister") || strings.Contains(s, "link_release") ||
			strings.Contains(s, "tasks_trace") || strings.Contains(s, "perf_uprobe_destroy"):
			return inDetach
		}
	}
	if root, err := tracefs.Root(); err == nil {
		if m, _ := filepath.Glob(filepath.Join(root, "instances", fmt.Sprintf("mmlab-%d-*", pid))); len(m) > 0 {
			return inTrace
		}
	}
	return onLine
}

// waitSession waits until no process is in session sid: the run and
// everything it started are gone. Only one that never exits fails the
// test, at its deadline.
func waitSession(t *testing.T, sid int) {
	t.Helper()
	for {
		left := session(sid)
		if len(left) == 0 {
			return
		}
		if d, ok := t.Deadline(); ok && time.Until(d) < time.Minute {
			t.Fatalf("processes of session %d still there: %v", sid, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// session lists the processes of session sid ("PID comm").
func session(sid int) []string {
	var left []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		i := strings.LastIndexByte(string(b), ')')
		if err != nil || i < 0 {
			continue
		}
		fs := strings.Fields(string(b[i+1:]))
		if len(fs) > 3 && fs[3] == strconv.Itoa(sid) {
			left = append(left, string(b[:i+1]))
		}
	}
	return left
}

// snapshot names what a run may leave outside its memory: the files under
// the runs' TMPDIR, tracefs instances and uprobe_events lines, mount
// points, files under /sys/fs/bpf, and BPF links no process holds a file
// for.
func (c *chaos) snapshot(t *testing.T) map[string]bool {
	s := map[string]bool{}
	filepath.WalkDir(c.tmp, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != c.tmp {
			s["tmp "+p] = true
		}
		return nil
	})
	filepath.WalkDir("/sys/fs/bpf", func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != "/sys/fs/bpf" {
			s["bpffs "+p] = true
		}
		return nil
	})
	if root, err := tracefs.Root(); err == nil {
		ins, _ := os.ReadDir(filepath.Join(root, "instances"))
		for _, in := range ins {
			if !liveRun(in.Name()) {
				s["tracefs instance "+in.Name()] = true
			}
		}
		b, _ := os.ReadFile(filepath.Join(root, "uprobe_events"))
		for line := range strings.Lines(string(b)) {
			s["uprobe_events "+strings.TrimSpace(line)] = true
		}
	}
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 {
			s["mount "+f[4]] = true
		}
	}
	for _, id := range unheldLinks(t) {
		s[fmt.Sprintf("BPF link %d", id)] = true
	}
	return s
}

// topOf names the entries of dir.
func topOf(dir string) map[string]bool {
	s := map[string]bool{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		s[filepath.Join(dir, e.Name())] = true
	}
	return s
}

// liveRun reports whether an ftrace instance is one of an mmlab run that
// is still running: one outside this test (the tests of other packages,
// another user's run), since the test's runs have ended when it looks.
func liveRun(instance string) bool {
	run, ok := strings.CutPrefix(instance, "mmlab-")
	if !ok || live.Dead(run, "-") {
		return false
	}
	pid, _, _ := strings.Cut(run, "-")
	_, err := os.Stat("/proc/" + pid)
	return err == nil
}

// diff lists what after has that before had not.
func diff(before, after map[string]bool) []string {
	var d []string
	for k := range after {
		if !before[k] {
			d = append(d, k)
		}
	}
	slices.Sort(d)
	return d
}

// bpf runs the bpf(2) command cmd on attr.
func bpf(cmd uintptr, attr unsafe.Pointer, size uintptr) (uintptr, syscall.Errno) {
	r, _, e := syscall.Syscall(321 /* SYS_BPF on amd64 */, cmd, uintptr(attr), size)
	return r, e
}

// unheldLinks lists the BPF links that exist (BPF_LINK_GET_NEXT_ID, then
// BPF_LINK_GET_FD_BY_ID, which takes only a link whose count is not zero)
// and that no process holds a file for (the link_id: lines of every
// /proc/PID/fdinfo/FD, bpf_link_show_fdinfo): a link pinned or leaked. The
// links other test packages hold while they run are held.
func unheldLinks(t *testing.T) []uint32 {
	const getNextID, getFDByID = 31, 30
	held := map[uint32]bool{}
	infos, _ := filepath.Glob("/proc/[0-9]*/fdinfo/*")
	for _, f := range infos {
		b, _ := os.ReadFile(f)
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "link_id:"); ok {
				if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
					held[uint32(id)] = true
				}
			}
		}
	}
	var ids []uint32
	attr := struct{ start, next, flags uint32 }{}
	for {
		if _, e := bpf(getNextID, unsafe.Pointer(&attr), unsafe.Sizeof(attr)); e != 0 {
			if e != syscall.ENOENT {
				t.Logf("BPF_LINK_GET_NEXT_ID: %v", e)
			}
			return ids
		}
		attr.start = attr.next
		if held[attr.next] {
			continue
		}
		get := struct{ id, next, flags uint32 }{id: attr.next}
		if fd, e := bpf(getFDByID, unsafe.Pointer(&get), unsafe.Sizeof(get)); e == 0 {
			syscall.Close(int(fd))
			ids = append(ids, attr.next)
		}
	}
}
