package tracefs

import (
	"os"
	"strings"
	"testing"
)

// testdata/lock-contention.trace is the head and a stretch of an instance's
// trace file on this project's Linux 6.18 machine: trace_clock mono,
// lock:contention_begin and lock:contention_end enabled for all tasks
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
	want := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, ": contention_") {
			want++
		}
	}
	if len(evs) != want || lost != 0 {
		t.Fatalf("%d events, %d lost; want %d, 0", len(evs), lost, want)
	}
	first := Event{Comm: "lt-mmlab", TID: 28969, CPU: 0, TimeNS: 18137_197037_000, Name: "contention_end", Args: "000000009d859150 (ret=0)"}
	if evs[0] != first {
		t.Errorf("first event %+v, want %+v", evs[0], first)
	}
	var rcu *Event
	for i, e := range evs {
		if e.Comm == "rcu_preempt" {
			rcu = &evs[i]
		}
		if i > 0 && e.TimeNS < evs[i-1].TimeNS {
			t.Errorf("event %d goes back in time: %+v after %+v", i, e, evs[i-1])
		}
	}
	if rcu == nil || rcu.TID != 15 || rcu.Name != "contention_end" || rcu.Args != "00000000dbf55e99 (ret=0)" {
		t.Errorf("the rcu_preempt line (a pid padded with spaces): %+v", rcu)
	}
}

// The header's counts and the kernel's LOST lines give the events lost; a
// line that is no event is an error.
func TestParseLostAndBad(t *testing.T) {
	_, lost, err := Parse(strings.NewReader("# entries-in-buffer/entries-written: 10/25   #P:2\n"))
	if err != nil || lost != 15 {
		t.Errorf("lost %d, %v; want 15", lost, err)
	}
	if _, lost, err := Parse(strings.NewReader("CPU:1 [LOST 3 EVENTS]\n")); err != nil || lost != 3 {
		t.Errorf("lost %d, %v; want 3", lost, err)
	}
	if _, _, err := Parse(strings.NewReader("contention_end: 000000009d859150 (ret=0)\n")); err == nil {
		t.Error("a line that is no event parsed")
	}
}
