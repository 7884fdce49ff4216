// Package design is the one form of the model's switches: each set of
// designs a seed compares (before and after, or the flavours of seed 004)
// is a named integer type whose values are listed once in a Set, which
// gives every such type its names, parsing, text marshalling (so
// flag.TextVar and encoding/json take it) and its check at construction.
//
// The zero value of every design type is unset: it is no design, and a
// constructor given it refuses it with ErrUnset, so that a forgotten field
// of a Config never silently picks one.
//
// It sits below every model package (it imports only the standard library)
// because each of them declares a design type of its own: kernel (seed
// 000's fork), procfs (seed 003's maps walk), uprobes (seed 004's
// flavour), explore (a scenario's before or after).
package design

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnset is the error of a constructor given the zero value of a design
// type.
var ErrUnset = errors.New("design unset")

// ErrUnknown is the error of parsing a name that is no value of the set.
var ErrUnknown = errors.New("unknown design")

// Set is the values of a design type T and their names: the value i+1 is
// named names[i]; 0 is unset.
type Set[T ~int] struct {
	kind  string // what the values are, for errors: "seed 000 design"
	names []string
}

// NewSet returns the set of kind whose values are 1, 2, … named names, in
// order.
func NewSet[T ~int](kind string, names ...string) Set[T] {
	return Set[T]{kind: kind, names: names}
}

// Values returns the set's values, in order.
func (s Set[T]) Values() []T {
	vs := make([]T, len(s.names))
	for i := range vs {
		vs[i] = T(i + 1)
	}
	return vs
}

// Names returns the names of the values, in order.
func (s Set[T]) Names() []string { return slices.Clone(s.names) }

// String returns v's name, "unset" for 0, or the kind and number of a
// value outside the set.
func (s Set[T]) String(v T) string {
	switch {
	case v == 0:
		return "unset"
	case int(v) < 0 || int(v) > len(s.names):
		return fmt.Sprintf("%s(%d)", s.kind, int(v))
	}
	return s.names[v-1]
}

// Check returns nil for a value of the set, an error wrapping ErrUnset for
// 0 and one wrapping ErrUnknown for any other.
func (s Set[T]) Check(v T) error {
	switch {
	case v == 0:
		return fmt.Errorf("%w: want a %s (%s)", ErrUnset, s.kind, strings.Join(s.names, " or "))
	case int(v) < 0 || int(v) > len(s.names):
		return fmt.Errorf("%w: %s %d", ErrUnknown, s.kind, int(v))
	}
	return nil
}

// Parse returns the value named name, or an error wrapping ErrUnknown.
func (s Set[T]) Parse(name string) (T, error) {
	if i := slices.Index(s.names, name); i >= 0 {
		return T(i + 1), nil
	}
	return 0, fmt.Errorf("%w: %s %q: want %s", ErrUnknown, s.kind, name, strings.Join(s.names, " or "))
}

// ParseList returns the values named names, in their order.
func (s Set[T]) ParseList(names []string) ([]T, error) {
	vs := make([]T, 0, len(names))
	for _, name := range names {
		v, err := s.Parse(name)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// Marshal is a design type's MarshalText: v's name, or an error for a
// value outside the set (unset included).
func (s Set[T]) Marshal(v T) ([]byte, error) {
	if err := s.Check(v); err != nil {
		return nil, err
	}
	return []byte(s.names[v-1]), nil
}

// Unmarshal is a design type's UnmarshalText: it sets *v to the value
// named text.
func (s Set[T]) Unmarshal(v *T, text []byte) error {
	p, err := s.Parse(string(text))
	if err != nil {
		return err
	}
	*v = p
	return nil
}
