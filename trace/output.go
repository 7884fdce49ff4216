package trace

import (
	"fmt"
	"strings"
)

// PeekLine is what a peek prints: "peek 0x<addr> <value>".
func PeekLine(addr uint64, v byte) string { return fmt.Sprintf("peek %#x %d", addr, v) }

// ErrorLine is what an op the kernel refuses prints: name is the errno's name
// as unix.ErrnoName gives it ("EEXIST"), or the signal and si_code of an
// access that raised one ("SIGSEGV SEGV_ACCERR"), or NotRet.
func ErrorLine(line int, name string) string { return fmt.Sprintf("error %d %s", line, name) }

// NotRet is the error name of an exec whose mapped byte is not a ret: the
// runner refused to run it.
const NotRet = "notret"

// Ret is the byte an exec calls: x86's near ret.
const Ret = 0xc3

// FileByte is the byte at offset off of every trace file.
func FileByte(off uint64) byte { return byte(off % 251) }

// Normalize rewrites every /proc/PID/maps line of a target's output as
// "START-END PERMS OFFSET NAME" (the name left out when empty), dropping the
// device, the inode and the padding, which differ between runs and targets.
// Peek, error and empty lines stay as they are.
func Normalize(output string) string {
	lines := strings.SplitAfter(output, "\n")
	var b strings.Builder
	for _, l := range lines {
		body, nl := strings.CutSuffix(l, "\n")
		if m, ok := normalizeMaps(body); ok {
			body = m
		}
		b.WriteString(body)
		if nl {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// normalizeMaps normalizes one maps line, or reports that it is not one.
func normalizeMaps(l string) (string, bool) {
	f := strings.Fields(l)
	if len(f) < 5 || len(f[1]) != 4 || !isHex(f[2]) || !strings.Contains(f[3], ":") {
		return "", false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok || !isHex(lo) || !isHex(hi) {
		return "", false
	}
	// The name is whatever follows the inode, with the padding before it
	// removed; it may contain spaces ("/dev/zero (deleted)").
	rest := l
	for range 5 {
		rest = strings.TrimLeft(rest, " ")
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			rest = ""
			break
		}
		rest = rest[i:]
	}
	name := strings.TrimLeft(rest, " ")
	s := f[0] + " " + f[1] + " " + f[2]
	if name != "" {
		s += " " + name
	}
	return s, true
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Diff compares two outputs after Normalize. It returns "" when they are
// equal, else a readable line diff: "-" lines only in want, "+" lines only in
// got, with two lines of context, each prefixed by its line number in want.
func Diff(want, got string) string {
	w, g := Normalize(want), Normalize(got)
	if w == g {
		return ""
	}
	a, b := strings.Split(w, "\n"), strings.Split(g, "\n")
	if len(a)*len(b) > 4_000_000 {
		// Too long for the quadratic diff: show the first difference.
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		at := func(s []string, i int) string {
			if i < len(s) {
				return fmt.Sprintf("%q", s[i])
			}
			return "end of output"
		}
		return fmt.Sprintf("first difference at line %d:\n-%s\n+%s\n", i+1, at(a, i), at(b, i))
	}
	// Longest common subsequence, then walk it.
	n, m := len(a), len(b)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type edit struct {
		op   byte // ' ', '-', '+'
		line int  // line number in want (of the next want line for '+')
		text string
	}
	var es []edit
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			es = append(es, edit{' ', i + 1, a[i]})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			es = append(es, edit{'+', i + 1, b[j]})
			j++
		default:
			es = append(es, edit{'-', i + 1, a[i]})
			i++
		}
	}
	var out strings.Builder
	const context = 2
	last := -1
	for k, e := range es {
		show := false
		for d := -context; d <= context; d++ {
			if k+d >= 0 && k+d < len(es) && es[k+d].op != ' ' {
				show = true
				break
			}
		}
		if !show {
			continue
		}
		if last >= 0 && k != last+1 {
			out.WriteString("...\n")
		}
		last = k
		fmt.Fprintf(&out, "%4d %c %s\n", e.line, e.op, e.text)
	}
	return out.String()
}
