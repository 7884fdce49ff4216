package tracefs

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// testdata/lock-contention.trace is the head and two stretches of an
// instance's trace file on this project's Linux 6.18 machine: trace_clock
// mono, lock:contention_begin with the filter "flags & 6" and the trigger
// "stacktrace if flags & 6", and lock:contention_end, enabled for all tasks
// during `mmlab run mapscan --target live --cases text --runs 1 --duration
// 1s`, read with cat after tracing_on 0.
func TestParseCaptured(t *testing.T) {
	b, err := os.ReadFile("testdata/lock-contention.trace")
	if err != nil {
		t.Fatal(err)
	}
	evs, lost, err := Parse(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	want, frames := 0, 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, ": contention_") || strings.Contains(l, ": <stack trace>") {
			want++
		}
		if strings.HasPrefix(l, " => ") {
			frames++
		}
	}
	if len(evs) != want || lost != 0 {
		t.Fatalf("%d events, %d lost; want %d, 0", len(evs), lost, want)
	}
	first := Event{Comm: "<idle>", TID: 0, CPU: 0, Flags: "d.s3.", TimeNS: 18810_360028_000, Name: "contention_end", Args: "00000000e468a37a (ret=0)"}
	if !reflect.DeepEqual(evs[0], first) {
		t.Errorf("first event %+v, want %+v", evs[0], first)
	}
	var kdamond []Event
	n := 0
	for i, e := range evs {
		n += len(e.Stack)
		if e.Comm == "kdamond.0" {
			kdamond = append(kdamond, e)
		}
		if i > 0 && e.TimeNS < evs[i-1].TimeNS {
			t.Errorf("event %d goes back in time: %+v after %+v", i, e, evs[i-1])
		}
		if (e.Name == StackTrace) != (len(e.Stack) > 0) {
			t.Errorf("event %d: %+v", i, e)
		}
	}
	if n != frames {
		t.Errorf("%d stack frames, want %d", n, frames)
	}
	// kdamond's begin, its stack (a rmap walk of DAMON), its end, a
	// spinlock's end.
	if len(kdamond) != 4 || kdamond[0].TID != 77 || kdamond[0].Args != "00000000c4bf4b73 (flags=READ)" ||
		kdamond[1].Name != StackTrace || len(kdamond[1].Stack) != 12 || kdamond[1].Stack[3] != "down_read" || kdamond[1].Stack[4] != "folio_lock_anon_vma_read" ||
		kdamond[2].Name != "contention_end" {
		t.Errorf("kdamond's events %+v", kdamond)
	}
}

// The header's counts and the kernel's LOST lines give the events lost; a
// line that is no event is an error, and so is a frame outside a stack.
func TestParseLostAndBad(t *testing.T) {
	_, lost, err := Parse(strings.NewReader("# entries-in-buffer/entries-written: 10/25   #P:2\n"))
	if err != nil || lost != 15 {
		t.Errorf("lost %d, %v; want 15", lost, err)
	}
	if _, lost, err := Parse(strings.NewReader("CPU:1 [LOST 3 EVENTS]\n")); err != nil || lost != 3 {
		t.Errorf("lost %d, %v; want 3", lost, err)
	}
	for _, bad := range []string{
		"contention_end: 000000009d859150 (ret=0)\n",
		"  lt-mmlab-8507    [001] ...1. 18810.364455: contention_end: 000000009d859150 (ret=0)\n => down_read\n",
	} {
		if _, _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
