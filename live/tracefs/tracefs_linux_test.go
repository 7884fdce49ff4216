package tracefs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"mmlab/live"
)

// An instance has the clock asked for, starts stopped, records the events
// enabled, and is gone after Close.
func TestInstance(t *testing.T) {
	in, err := New("mono")
	if errors.Is(err, live.ErrNotSupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := in.Dir()
	defer func() {
		if _, err := os.Stat(dir); err == nil {
			in.Close()
		}
	}()
	if got := Leftovers(); len(got) != 1 || got[0] != dir {
		t.Errorf("instances %v, want [%s]", got, dir)
	}
	read := func(file string) string {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if c := read("trace_clock"); !strings.Contains(c, "[mono]") {
		t.Errorf("trace_clock %q", c)
	}
	if on := read("tracing_on"); on != "0" {
		t.Errorf("a new instance has tracing_on %s", on)
	}
	if err := in.SetEvent("lock/contention_begin", "filter", "flags & 6"); err != nil {
		t.Fatal(err)
	}
	if err := in.Enable("lock/contention_begin", "lock/contention_end"); err != nil {
		t.Fatal(err)
	}
	if f := read("events/lock/contention_begin/filter"); f != "flags & 6" {
		t.Errorf("filter %q", f)
	}
	if e := read("events/lock/contention_end/enable"); e != "1" {
		t.Errorf("enable %q", e)
	}
	if err := in.SetPIDs(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if p := read("set_event_pid"); p != strconv.Itoa(os.Getpid()) {
		t.Errorf("set_event_pid %q", p)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, lost, err := in.Events(); err != nil || lost != 0 {
		t.Errorf("events: %d lost, %v", lost, err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close: %v", err)
	}
	if got := Leftovers(); len(got) != 0 {
		t.Errorf("instances left %v", got)
	}
}
