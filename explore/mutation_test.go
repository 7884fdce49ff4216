package explore

import (
	"strings"
	"testing"
)

// An undo that takes nothing out leaves the scenario passing, which
// FindUndoneFix reports as the fix going unnoticed.
func TestFindUndoneFixWantsAFailure(t *testing.T) {
	undone := false
	o := Options{Machine: x86, Design: After, Schedules: 3, Seed: 1}
	_, err := FindUndoneFix(Lookup("reg-vs-fork"), o, func(*World) { undone = true }, []Property{PropStall})
	if !undone || err == nil || !strings.Contains(err.Error(), "went unnoticed") {
		t.Fatalf("undone %v, err %v", undone, err)
	}
}
