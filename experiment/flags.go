package experiment

import (
	"fmt"
	"strconv"
	"strings"
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
		return fmt.Errorf("%q is not a byte count (a whole number with an optional K, M or G suffix)", s)
	}
	*b = Bytes(n << shift)
	return nil
}
