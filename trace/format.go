package trace

import (
	"errors"
	"fmt"
	"strings"
)

// String gives the program in canonical form, which Parse reads back into an
// equal Program when the ops' Line fields number the lines of this text (as
// Generate's do): the arena on line 1, then one op a line.
func (p *Program) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "arena %#x %#x\n", p.ArenaLo, p.ArenaHi)
	for i := range p.Ops {
		b.WriteString(p.Ops[i].String())
		b.WriteByte('\n')
	}
	return b.String()
}

// String gives the op as one line of the language.
func (o *Op) String() string {
	switch o.Kind {
	case OpFile:
		return fmt.Sprintf("file %s %s", o.File, size(o.Size))
	case OpMmap:
		fl := "private"
		if o.Shared {
			fl = "shared"
		}
		if o.Fixed {
			fl += ",fixed"
		}
		if o.NoReplace {
			fl += ",noreplace"
		}
		if o.Hint {
			fl += ",hint"
		}
		if o.Populate {
			fl += ",populate"
		}
		s := fmt.Sprintf("mmap %#x %s %s %s", o.Addr, size(o.Len), o.Prot, fl)
		if o.File != "" {
			s += fmt.Sprintf(" %s %s", o.File, size(o.Off))
		}
		return s
	case OpMunmap:
		return fmt.Sprintf("munmap %#x %s", o.Addr, size(o.Len))
	case OpMprotect:
		return fmt.Sprintf("mprotect %#x %s %s", o.Addr, size(o.Len), o.Prot)
	case OpMremap:
		s := fmt.Sprintf("mremap %#x %s %s", o.Addr, size(o.Len), size(o.NewLen))
		if o.MayMove {
			s += fmt.Sprintf(" maymove fixed %#x", o.NewAddr)
		}
		return s
	case OpTouch, OpPeek, OpExec, OpWrite:
		return fmt.Sprintf("%s %#x", o.Kind, o.Addr)
	case OpPoke:
		return fmt.Sprintf("poke %#x %d", o.Addr, o.Value)
	case OpFork, OpExit, OpMaps:
		return o.Kind.String()
	}
	return fmt.Sprintf("# unknown op kind %d", int(o.Kind))
}

// size prints a length with the largest of the G, M, K suffixes that divides
// it, else in decimal.
func size(v uint64) string {
	switch {
	case v == 0:
		return "0"
	case v%(1<<30) == 0:
		return fmt.Sprintf("%dG", v>>30)
	case v%(1<<20) == 0:
		return fmt.Sprintf("%dM", v>>20)
	case v%(1<<10) == 0:
		return fmt.Sprintf("%dK", v>>10)
	}
	return fmt.Sprintf("%d", v)
}

// Validate checks a Program that may not come from Parse (Generate's, or one
// built by hand) with all of Parse's rules, by parsing its canonical text
// again. Both targets' runners call it first, so that they refuse the same
// Programs with the same error and nothing outside the arena ever runs.
func (p *Program) Validate() error {
	_, err := Parse(strings.NewReader(p.String()))
	var se *SyntaxError
	if errors.As(err, &se) {
		// Line 1 of the canonical text is the arena, line k+2 is op k.
		if k := se.Line - 2; k >= 0 && k < len(p.Ops) {
			return fmt.Errorf("invalid trace: line %d (%s): %s", p.Ops[k].Line, &p.Ops[k], se.Msg)
		}
		return fmt.Errorf("invalid trace: %s", se.Msg)
	}
	return err
}
