package experiment

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bytes is a byte count given on the command line with an optional K, M or G
// suffix (powers of 1024); its JSON is the plain number.
type Bytes uint64

// String prints b with the largest suffix that divides it.
func (b Bytes) String() string {
	for _, u := range []struct {
		s     string
		shift uint
	}{{"G", 30}, {"M", 20}, {"K", 10}} {
		if b != 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatUint(uint64(b)>>u.shift, 10) + u.s
		}
	}
	return strconv.FormatUint(uint64(b), 10)
}

// Set parses "4096", "128M", "1G".
func (b *Bytes) Set(s string) error {
	shift := uint(0)
	num := s
	switch {
	case strings.HasSuffix(s, "K"):
		shift, num = 10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		shift, num = 20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		shift, num = 30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > (1<<63)>>shift {
		return fmt.Errorf("not a byte count (a whole number with an optional K, M or G suffix)")
	}
	*b = Bytes(n << shift)
	return nil
}

// Duration is a time.Duration given on the command line as Go writes one
// ("250ms", "2s"); its JSON is the number of milliseconds, the unit of the
// documents' *_ms params.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String prints d as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// Set parses a Go duration.
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration (a number with a unit: 500us, 250ms, 2s)")
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes d in milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(d) / float64(time.Millisecond))
}

// UnmarshalJSON reads milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// Var defines --name with the value v, as flag.Var does, and names the flag
// and the value in v's errors: "--size 1T: not a byte count (...)".
func Var(fs *flag.FlagSet, v flag.Value, name, usage string) {
	fs.Var(named{v, name}, name, usage)
}

type named struct {
	flag.Value
	name string
}

// String is the value's; "" for the zero named, which flag.PrintDefaults
// makes to tell a default from the zero value.
func (n named) String() string {
	if n.Value == nil {
		return ""
	}
	return n.Value.String()
}

func (n named) Set(s string) error {
	if err := n.Value.Set(s); err != nil {
		return fmt.Errorf("--%s %s: %w", n.name, s, err)
	}
	return nil
}

// NamesVar defines --name, a comma-separated list of choices that parses
// into *p; an unknown item or an empty list is refused with List's error.
func NamesVar(fs *flag.FlagSet, p *[]string, name, usage string, choices ...string) {
	ListVar(fs, p, name, usage, func(s string) ([]string, error) { return List(name, s, choices...) })
}

// ListVar defines --name, a comma-separated list that parse turns into
// *p.
func ListVar(fs *flag.FlagSet, p *[]string, name, usage string, parse func(string) ([]string, error)) {
	fs.Var(&list{p, parse}, name, usage)
}

type list struct {
	p     *[]string
	parse func(string) ([]string, error)
}

func (v *list) String() string {
	if v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

func (v *list) Set(s string) (err error) {
	*v.p, err = v.parse(s)
	return err
}

// CountsVar defines --name, a comma-separated list of counts from lo to hi
// that parses into *p, refused with Counts's error.
func CountsVar(fs *flag.FlagSet, p *[]int, name, usage string, lo, hi int) {
	fs.Var(&counts{p, name, lo, hi}, name, usage)
}

type counts struct {
	p      *[]int
	name   string
	lo, hi int
}

func (v *counts) String() string {
	if v.p == nil {
		return ""
	}
	s := make([]string, len(*v.p))
	for i, n := range *v.p {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (v *counts) Set(s string) (err error) {
	*v.p, err = Counts(v.name, s, v.lo, v.hi)
	return err
}

// Args returns the command-line flags that turn the options defaults into
// o: "--NAME VALUE" (a boolean "--NAME" or "--NAME=false") for each flag
// whose value differs, in name order, each variable once (a flag and its
// alias both bind one).
func Args(o, defaults Options) []string {
	set := func(x Options) *flag.FlagSet {
		fs := flag.NewFlagSet("args", flag.ContinueOnError)
		x.Flags(fs)
		return fs
	}
	fo, fd := set(o), set(defaults)
	var out []string
	seen := map[flag.Value]bool{}
	fo.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		if seen[f.Value] || v == fd.Lookup(f.Name).Value.String() {
			return
		}
		seen[f.Value] = true
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if v == "true" {
				out = append(out, "--"+f.Name)
			} else {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name, v)
	})
	return out
}
