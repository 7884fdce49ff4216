package design_test

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"slices"
	"testing"

	"mmlab/design"
)

// color is a design type as the model packages declare theirs.
type color int

const (
	red color = iota + 1
	green
)

var colors = design.NewSet[color]("color", "red", "green")

func (c color) String() string                { return colors.String(c) }
func (c color) MarshalText() ([]byte, error)  { return colors.Marshal(c) }
func (c *color) UnmarshalText(b []byte) error { return colors.Unmarshal(c, b) }

// Every value's name parses back to it; the zero value is unset, and
// neither it nor a value outside the set has a name to marshal.
func TestSet(t *testing.T) {
	if got := colors.Values(); !slices.Equal(got, []color{red, green}) {
		t.Errorf("Values = %v", got)
	}
	if got := colors.Names(); !slices.Equal(got, []string{"red", "green"}) {
		t.Errorf("Names = %v", got)
	}
	for _, c := range colors.Values() {
		if got, err := colors.Parse(c.String()); err != nil || got != c {
			t.Errorf("Parse(%q) = %v, %v", c, got, err)
		}
		if err := colors.Check(c); err != nil {
			t.Errorf("Check(%v) = %v", c, err)
		}
	}
	if _, err := colors.Parse("blue"); !errors.Is(err, design.ErrUnknown) {
		t.Errorf(`Parse("blue") = %v, want ErrUnknown`, err)
	}
	if err := colors.Check(0); !errors.Is(err, design.ErrUnset) {
		t.Errorf("Check(0) = %v, want ErrUnset", err)
	}
	if err := colors.Check(3); !errors.Is(err, design.ErrUnknown) {
		t.Errorf("Check(3) = %v, want ErrUnknown", err)
	}
	if s := color(0).String(); s != "unset" {
		t.Errorf("String(0) = %q", s)
	}
	if _, err := json.Marshal(color(0)); !errors.Is(err, design.ErrUnset) {
		t.Errorf("json.Marshal(0) = %v, want ErrUnset", err)
	}
	if got, err := colors.ParseList([]string{"green", "red"}); err != nil || !slices.Equal(got, []color{green, red}) {
		t.Errorf("ParseList = %v, %v", got, err)
	}
}

// A design type is a JSON string and a flag (flag.TextVar).
func TestTextForms(t *testing.T) {
	b, err := json.Marshal(struct{ C color }{green})
	if err != nil || string(b) != `{"C":"green"}` {
		t.Fatalf("json.Marshal = %s, %v", b, err)
	}
	var v struct{ C color }
	if err := json.Unmarshal(b, &v); err != nil || v.C != green {
		t.Errorf("json.Unmarshal = %v, %v", v.C, err)
	}
	if err := json.Unmarshal([]byte(`{"C":"blue"}`), &v); !errors.Is(err, design.ErrUnknown) {
		t.Errorf("json.Unmarshal(blue) = %v, want ErrUnknown", err)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c color
	fs.TextVar(&c, "color", red, "")
	if err := fs.Parse([]string{"--color", "green"}); err != nil || c != green {
		t.Errorf("--color green: %v, %v", c, err)
	}
	if err := fs.Parse([]string{"--color", "blue"}); err == nil {
		t.Error("--color blue accepted")
	}
}
