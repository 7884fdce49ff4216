package uapi

import (
	"bytes"
	"errors"
	"strconv"
)

// Perm is a VMA's permissions as PROCMAP_QUERY returns them in vma_flags:
// PROCMAP_QUERY_VMA_READABLE, _WRITABLE, _EXECUTABLE and _SHARED.
type Perm uint64

// String returns the four characters of the maps text: "rwxs", "r--p"...
func (p Perm) String() string { return string(p.appendText(nil)) }

func (p Perm) appendText(b []byte) []byte {
	c := func(bit Perm, yes, no byte) byte {
		if p&bit != 0 {
			return yes
		}
		return no
	}
	return append(b,
		c(PROCMAP_QUERY_VMA_READABLE, 'r', '-'),
		c(PROCMAP_QUERY_VMA_WRITABLE, 'w', '-'),
		c(PROCMAP_QUERY_VMA_EXECUTABLE, 'x', '-'),
		c(PROCMAP_QUERY_VMA_SHARED, 's', 'p'))
}

// VMA is one virtual memory area, with the field names of struct
// procmap_query.
type VMA struct {
	Start, End uint64 // [Start, End)
	Flags      Perm
	Offset     uint64 // file offset of Start; 0 for anonymous VMAs
	DevMajor   uint32
	DevMinor   uint32
	Inode      uint64
	// PageSize is vma_page_size from PROCMAP_QUERY; the text walk leaves it 0.
	PageSize uint64
	// Name is the name as /proc/PID/maps prints it (a file path, with a
	// newline in it written \012 as seq_path does, "[heap]", "[anon:x]"...),
	// or nil for a VMA without a name. In a Walk callback it points into the
	// Reader's buffer and is valid only during the call.
	Name []byte
}

// Clone returns a copy of v that owns its name.
func (v *VMA) Clone() *VMA {
	c := *v
	if v.Name != nil {
		c.Name = bytes.Clone(v.Name)
	}
	return &c
}

// nameColumn is where the name starts in a maps line whose header is short
// enough: show_vma_header_prefix sets the width to 25 + 6*sizeof(void *) - 1
// = 72 columns on 64-bit, and seq_pad pads to it and adds one space.
const nameColumn = 25 + 6*8 - 1

// AppendText appends v's /proc/PID/maps line, newline included, to b.
// Mirrors fs/proc/task_mmu.c:show_map_vma() and show_vma_header_prefix().
func (v *VMA) AppendText(b []byte) []byte {
	lineStart := len(b)
	b = appendHex(b, v.Start, 8)
	b = append(b, '-')
	b = appendHex(b, v.End, 8)
	b = append(b, ' ')
	b = v.Flags.appendText(b)
	b = append(b, ' ')
	b = appendHex(b, v.Offset, 8)
	b = append(b, ' ')
	b = appendHex(b, uint64(v.DevMajor), 2)
	b = append(b, ':')
	b = appendHex(b, uint64(v.DevMinor), 2)
	b = append(b, ' ')
	b = strconv.AppendUint(b, v.Inode, 10)
	b = append(b, ' ')
	if v.Name != nil {
		for len(b)-lineStart < nameColumn {
			b = append(b, ' ')
		}
		b = append(b, ' ')
		b = append(b, v.Name...)
	}
	return append(b, '\n')
}

// appendHex appends x in lowercase hex, zero-padded to width digits, as
// fs/seq_file.c:seq_put_hex_ll() does.
func appendHex(b []byte, x uint64, width int) []byte {
	var tmp [16]byte
	i := len(tmp)
	for x != 0 || i == len(tmp) {
		i--
		tmp[i] = "0123456789abcdef"[x&0xf]
		x >>= 4
	}
	for len(tmp)-i < width {
		b = append(b, '0')
		width--
	}
	return append(b, tmp[i:]...)
}

var errSyntax = errors.New("malformed maps line")

// spaces is the longest padding a line can have.
var spaces = bytes.Repeat([]byte{' '}, nameColumn+1)

// ParseLine fills v from one line of /proc/PID/maps, without its newline.
// v.Name points into line. It is the inverse of AppendText.
func ParseLine(line []byte, v *VMA) error {
	p := lineParser{b: line}
	v.Start = p.hex('-')
	v.End = p.hex(' ')
	v.Flags = p.perm()
	v.Offset = p.hex(' ')
	v.DevMajor = uint32(p.hex(':'))
	v.DevMinor = uint32(p.hex(' '))
	v.Inode = p.dec(' ')
	v.PageSize = 0
	v.Name = nil
	if p.bad {
		return errSyntax
	}
	if h := p.i; h < len(line) {
		// The header is padded with spaces to nameColumn, then one space.
		start := h + 1
		if h < nameColumn {
			start = nameColumn + 1
		}
		if start > len(line) {
			return errSyntax
		}
		if !bytes.Equal(line[h:start], spaces[:start-h]) {
			return errSyntax
		}
		v.Name = line[start:len(line):len(line)]
	}
	return nil
}

// lineParser reads the fields of a maps line; any mismatch sets bad.
type lineParser struct {
	b   []byte
	i   int
	bad bool
}

func (p *lineParser) hex(sep byte) uint64 {
	var x uint64
	b, i := p.b, p.i
	for ; i < len(b); i++ {
		d := hexVal[b[i]]
		if d > 15 {
			break
		}
		x = x<<4 | uint64(d)
	}
	return p.endNumber(x, i, 16, sep)
}

// endNumber ends a number read by hex or dec: its digits are p.b[p.i:i] and
// its value x. There must be 1 to maxDigits of them and sep after them, which
// it consumes; otherwise it sets bad and returns 0.
func (p *lineParser) endNumber(x uint64, i, maxDigits int, sep byte) uint64 {
	if n := i - p.i; n == 0 || n > maxDigits || i == len(p.b) || p.b[i] != sep {
		p.bad = true
		return 0
	}
	p.i = i + 1
	return x
}

// hexVal maps a lowercase hex digit to its value and anything else to 0xff.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	return t
}()

func (p *lineParser) dec(sep byte) uint64 {
	var x uint64
	b, i := p.b, p.i
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		x = x*10 + uint64(d)
	}
	return p.endNumber(x, i, 20, sep)
}

func (p *lineParser) perm() Perm {
	b, i := p.b, p.i
	if i+5 > len(b) || b[i+4] != ' ' {
		p.bad = true
		return 0
	}
	f := permBit(b[i], 'r', '-', PROCMAP_QUERY_VMA_READABLE) |
		permBit(b[i+1], 'w', '-', PROCMAP_QUERY_VMA_WRITABLE) |
		permBit(b[i+2], 'x', '-', PROCMAP_QUERY_VMA_EXECUTABLE) |
		permBit(b[i+3], 's', 'p', PROCMAP_QUERY_VMA_SHARED)
	if f&permBad != 0 {
		p.bad = true
	}
	p.i = i + 5
	return f &^ permBad
}

// permBad marks a permission character that is neither of its two forms.
const permBad Perm = 1 << 63

func permBit(c, yes, no byte, bit Perm) Perm {
	switch c {
	case yes:
		return bit
	case no:
		return 0
	}
	return permBad
}

// EscapeName rewrites a name returned by PROCMAP_QUERY (a raw d_path) as
// the maps text prints it: seq_path escapes '\n' as \012. Mirrors
// fs/seq_file.c:mangle_path() with esc "\n". Special names ([heap],
// [anon:x]) never contain a newline, so escaping every name is exact.
func EscapeName(dst, name []byte) []byte {
	for _, c := range name {
		if c == '\n' {
			dst = append(dst, '\\', '0', '1', '2')
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
