package replay

import (
	"testing"

	"mmlab/trace"
)

// TestDifferentialFamilies replays the same fixed set of traces of every
// harder generator family (seeds 1..80 of each, 720 traces) on the model and
// on the live kernel and requires the same output, as TestDifferential does
// for the basic family.
func TestDifferentialFamilies(t *testing.T) {
	for _, fam := range trace.Families[1:] {
		t.Run(fam.Name, func(t *testing.T) {
			compareTargets(t, fam.Name, 1, *familySeeds, trace.GenOptions{Family: fam.Name})
		})
	}
}
