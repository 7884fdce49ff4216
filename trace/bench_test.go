package trace

import (
	"strings"
	"testing"
)

// BenchmarkParse parses a generated trace of 1000 ops; the figure is per
// trace, and ns/op divided by 1000 is the cost of one line.
func BenchmarkParse(b *testing.B) {
	src := Generate(1, GenOptions{Ops: 1000}).String()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Parse(strings.NewReader(src)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenerate generates a 40-op trace (the default size).
func BenchmarkGenerate(b *testing.B) {
	var seed int64
	for b.Loop() {
		Generate(seed, GenOptions{})
		seed++
	}
}
