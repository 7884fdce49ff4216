package mapscan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The note names the kdamonds that are on, with their operations and
// schemes, as DAMON's sysfs tree lists them; none without DAMON or with
// every kdamond off.
func TestDAMONNote(t *testing.T) {
	root := t.TempDir()
	write := func(v string, p ...string) {
		f := filepath.Join(append([]string{root}, p...)...)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := damonNote(filepath.Join(root, "absent")); got != "" {
		t.Errorf("without DAMON: %q", got)
	}
	write("2", "nr_kdamonds")
	write("on", "0", "state")
	write("75", "0", "pid")
	write("1", "0", "contexts", "nr_contexts")
	write("paddr", "0", "contexts", "0", "operations")
	write("2", "0", "contexts", "0", "schemes", "nr_schemes")
	write("pageout", "0", "contexts", "0", "schemes", "0", "action")
	write("stat", "0", "contexts", "0", "schemes", "1", "action")
	write("off", "1", "state")
	write("1", "1", "contexts", "nr_contexts")
	write("vaddr", "1", "contexts", "0", "operations")
	got := damonNote(root)
	if want := "DAMON is on: kdamond 0 (pid 75): operations paddr, schemes pageout,stat ("; !strings.HasPrefix(got, want) || strings.Contains(got, "vaddr") {
		t.Errorf("note %q, want it to begin %q and not to name kdamond 1", got, want)
	}
	write("off", "0", "state")
	if got := damonNote(root); got != "" {
		t.Errorf("every kdamond off: %q", got)
	}
}
