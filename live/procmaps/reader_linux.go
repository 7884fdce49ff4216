package procmaps

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"mmlab/uapi"

	"golang.org/x/sys/unix"
)

// Error is the error of every Reader operation. It names the process, what
// happened, the system call and its errno, and unwraps to the errno so that
// errors.Is(err, unix.ESRCH) and the like work.
type Error struct {
	Pid   int
	What  string // "does not exist", "exited during the walk", ...
	Op    string // the failing call: "open /proc/1/maps", "PROCMAP_QUERY", ...
	Errno syscall.Errno
}

func (e *Error) Error() string {
	return fmt.Sprintf("procmaps: process %d %s (%s: %s)", e.Pid, e.What, e.Op, unix.ErrnoName(e.Errno))
}

func (e *Error) Unwrap() error { return e.Errno }

// Initial and largest sizes of the buffers. The kernel never returns a
// name longer than PATH_MAX through PROCMAP_QUERY.
const (
	textBufSize = 64 << 10
	nameBufSize = 256
	pathMax     = 4096
)

// Reader reads the VMAs of one process through one open /proc/PID/maps file.
// The mm is the one the process had when Open ran (an exec or an exit ends
// it). A Reader is not safe for concurrent use.
type Reader struct {
	pid  int
	path string
	fd   int
	buf  []byte            // the text read buffer, reused by every Walk
	name []byte            // the PROCMAP_QUERY name buffer, grown on ENAMETOOLONG up to PATH_MAX
	esc  []byte            // a query name with its newlines escaped
	vma  uapi.VMA          // what the callbacks get
	q    uapi.ProcmapQuery // the ioctl argument, here so that it is not allocated per call
	// pin keeps name where the kernel writes it during a Lookup or a
	// WalkQuery (pinned is what it holds). Nothing stays pinned between
	// calls, so a Reader dropped without Close leaks nothing.
	pin    runtime.Pinner
	pinned *byte
	// query runs the ioctl; tests replace it to play a kernel without
	// PROCMAP_QUERY (before 6.11: ENOTTY).
	query func(fd int, q *uapi.ProcmapQuery, name []byte) error
	// noQuery records that the kernel answered ENOTTY: Lookup scans the text.
	noQuery bool
}

// Open opens /proc/PID/maps. The caller must be allowed to ptrace-read the
// process (same user, or root).
func Open(pid int) (*Reader, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/maps"
	if pid <= 0 {
		return nil, &Error{Pid: pid, What: "does not exist", Op: "open " + path, Errno: unix.ESRCH}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		e := &Error{Pid: pid, What: "cannot be read", Op: "open " + path, Errno: errnoOf(err)}
		switch e.Errno {
		case unix.ENOENT, unix.ESRCH:
			e.What = "does not exist"
		case unix.EACCES, unix.EPERM:
			e.What = "cannot be read: permission denied"
		}
		return nil, e
	}
	return &Reader{
		pid:   pid,
		path:  path,
		fd:    fd,
		buf:   make([]byte, textBufSize),
		name:  make([]byte, nameBufSize),
		query: procmapQuery,
	}, nil
}

// Pid returns the process the Reader reads.
func (r *Reader) Pid() int { return r.pid }

// Close closes the maps file.
func (r *Reader) Close() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	if err != nil {
		return r.fail("cannot be closed", "close "+r.path, err)
	}
	return nil
}

func (r *Reader) fail(what, op string, err error) error {
	return &Error{Pid: r.pid, What: what, Op: op, Errno: errnoOf(err)}
}

func (r *Reader) exited(op string, err error) error {
	return r.fail("exited during the walk", op, err)
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// Walk calls fn for each VMA of the process, in address order, until fn
// returns false. It streams the /proc/PID/maps text through one reused
// buffer: no allocation per VMA, and fn's *VMA (and its Name) is valid only
// during the call. Like the text itself it includes the gate VMA
// ([vsyscall]), and a VMA changed during the walk may be seen twice (old and
// new form), but an address mapped throughout the walk is never missed.
func (r *Reader) Walk(fn func(*uapi.VMA) bool) error {
	if _, err := unix.Seek(r.fd, 0, 0); err != nil {
		return r.fail("cannot be read", "lseek "+r.path, err)
	}
	carry := 0 // bytes of an unfinished line at the start of r.buf
	seen := false
	for {
		if carry == len(r.buf) { // one line longer than the buffer
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		n, err := unix.Read(r.fd, r.buf[carry:])
		if err == unix.EINTR {
			continue
		}
		if err == unix.ESRCH {
			return r.exited("read "+r.path, err)
		}
		if err != nil {
			return r.fail("cannot be read", "read "+r.path, err)
		}
		if n == 0 {
			if carry > 0 {
				return r.fail("gave a truncated maps line", "read "+r.path, unix.EIO)
			}
			return r.checkAlive(seen)
		}
		data := r.buf[:carry+n]
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			if err := uapi.ParseLine(data[:i], &r.vma); err != nil {
				return r.fail(fmt.Sprintf("gave a malformed maps line %q", data[:i]), "read "+r.path, unix.EIO)
			}
			seen = true
			if !fn(&r.vma) {
				return nil
			}
			data = data[i+1:]
		}
		carry = copy(r.buf, data)
	}
}

// checkAlive tells a complete walk from one cut short by the process's exit:
// both end in EOF, since the kernel's m_start returns nothing once the mm
// has no users. PROCMAP_QUERY on the same file answers ESRCH then; without
// the ioctl, a fresh read of a live mm is never empty (it has a stack).
// A kernel thread never had an mm: its empty walk (seen is false) is right.
func (r *Reader) checkAlive(seen bool) error {
	r.q = uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryFlags: uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA}
	err := r.ioctl(&r.q, nil)
	switch err {
	case nil, unix.ENOENT:
		return nil
	case unix.ESRCH:
		if !seen && isKernelThread(r.pid) {
			return nil
		}
		return r.exited("read "+r.path+" then PROCMAP_QUERY", err)
	case unix.ENOTTY:
		r.noQuery = true
	default:
		return r.fail("cannot be queried", "PROCMAP_QUERY", err)
	}
	if _, err := unix.Seek(r.fd, 0, 0); err != nil {
		return r.fail("cannot be read", "lseek "+r.path, err)
	}
	for {
		n, err := unix.Read(r.fd, r.buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ESRCH || (err == nil && n == 0):
			if !seen && isKernelThread(r.pid) {
				return nil
			}
			return r.exited("read "+r.path, unix.ESRCH)
		case err != nil:
			return r.fail("cannot be read", "read "+r.path, err)
		}
		return nil
	}
}

func (r *Reader) ioctl(q *uapi.ProcmapQuery, name []byte) error {
	for {
		err := r.query(r.fd, q, name)
		if err != unix.EINTR {
			return err
		}
	}
}

// pinName pins the name buffer until unpin.
func (r *Reader) pinName() {
	if p := &r.name[0]; r.pinned != p {
		r.pin.Pin(p)
		r.pinned = p
	}
}

func (r *Reader) unpin() {
	r.pin.Unpin()
	r.pinned = nil
}

// queryVMA asks PROCMAP_QUERY for the VMA matching addr and flags, with its
// name, and fills r.vma. A name that does not fit (ENAMETOOLONG) makes it
// grow the name buffer, up to PATH_MAX, and ask again. The caller unpins.
func (r *Reader) queryVMA(addr, flags uint64) error {
	for {
		r.pinName()
		r.q = uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryFlags: flags, QueryAddr: addr}
		q := &r.q
		err := r.ioctl(q, r.name)
		if err == unix.ENAMETOOLONG && len(r.name) < pathMax {
			r.name = make([]byte, min(2*len(r.name), pathMax))
			continue
		}
		if err != nil {
			return err
		}
		v := &r.vma
		v.Start, v.End = q.VMAStart, q.VMAEnd
		v.Flags = uapi.Perm(q.VMAFlags)
		v.Offset, v.Inode = q.VMAOffset, q.Inode
		v.DevMajor, v.DevMinor = q.DevMajor, q.DevMinor
		v.PageSize = q.VMAPageSize
		v.Name = nil
		if q.VMANameSize > 0 {
			raw := r.name[:q.VMANameSize-1] // without the NUL
			v.Name = raw
			if bytes.IndexByte(raw, '\n') >= 0 {
				r.esc = uapi.EscapeName(r.esc[:0], raw)
				v.Name = r.esc
			}
		}
		return nil
	}
}

// WalkQuery calls fn for each VMA of the process, like Walk, but asks
// PROCMAP_QUERY for each (COVERING_OR_NEXT_VMA from 0, then from the end of
// the VMA found), one ioctl per VMA. The query sees only the VMAs of the mm,
// so unlike the text it never reports the gate VMA ([vsyscall]); its VMAs
// carry PageSize. It needs Linux 6.11 (ENOTTY before).
func (r *Reader) WalkQuery(fn func(*uapi.VMA) bool) error {
	defer r.unpin()
	addr := uint64(0)
	for {
		switch err := r.queryVMA(addr, uapi.PROCMAP_QUERY_COVERING_OR_NEXT_VMA); err {
		case nil:
		case unix.ENOENT:
			return nil
		case unix.ESRCH:
			if addr == 0 && isKernelThread(r.pid) {
				return nil
			}
			return r.exited("PROCMAP_QUERY", err)
		case unix.ENOTTY:
			return r.fail("cannot be queried: PROCMAP_QUERY needs Linux 6.11", "PROCMAP_QUERY", err)
		default:
			return r.fail(fmt.Sprintf("cannot be queried at %#x", addr), "PROCMAP_QUERY", err)
		}
		if !fn(&r.vma) {
			return nil
		}
		addr = r.vma.End
	}
}

// Lookup returns the VMA that covers addr, asking PROCMAP_QUERY, or, on a
// kernel without it (ENOTTY, before 6.11), scanning the text. No VMA there
// is an error that unwraps to ENOENT. The query does not see the gate VMA;
// the text scan does.
func (r *Reader) Lookup(addr uint64) (*uapi.VMA, error) {
	if !r.noQuery {
		err := r.queryVMA(addr, 0)
		r.unpin()
		switch err {
		case nil:
			return r.vma.Clone(), nil
		case unix.ENOTTY:
			r.noQuery = true
		case unix.ENOENT:
			return nil, r.fail(fmt.Sprintf("has no VMA at %#x", addr), "PROCMAP_QUERY", err)
		case unix.ESRCH:
			if isKernelThread(r.pid) {
				return nil, r.fail("is a kernel thread: it has no address space", "PROCMAP_QUERY", err)
			}
			return nil, r.fail("has exited", "PROCMAP_QUERY", err)
		default:
			return nil, r.fail(fmt.Sprintf("cannot be queried at %#x", addr), "PROCMAP_QUERY", err)
		}
	}
	return r.LookupText(addr)
}

// LookupText returns the VMA that covers addr by scanning the /proc/PID/maps
// text up to it, the way to ask before Linux 6.11. No VMA there is an error
// that unwraps to ENOENT.
func (r *Reader) LookupText(addr uint64) (*uapi.VMA, error) {
	var found *uapi.VMA
	err := r.Walk(func(v *uapi.VMA) bool {
		if v.End > addr {
			if v.Start <= addr {
				found = v.Clone()
			}
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, r.fail(fmt.Sprintf("has no VMA at %#x", addr), "scan of "+r.path, unix.ENOENT)
	}
	return found, nil
}

// buildIDSizeMax is BUILD_ID_SIZE_MAX of include/linux/buildid.h.
const buildIDSizeMax = 20

// BuildID returns the ELF build ID (the NT_GNU_BUILD_ID note) of the file
// mapped at addr, as PROCMAP_QUERY reads it, or nil when the VMA has no file
// or the file has none. It needs Linux 6.11; no VMA at addr is an error that
// unwraps to ENOENT.
func (r *Reader) BuildID(addr uint64) ([]byte, error) {
	var buf [buildIDSizeMax]byte
	var pin runtime.Pinner
	pin.Pin(&buf[0])
	defer pin.Unpin()
	r.q = uapi.ProcmapQuery{
		Size: uapi.SizeofProcmapQuery, QueryAddr: addr,
		BuildIDSize: buildIDSizeMax, BuildIDAddr: bufAddr(buf[:]),
	}
	switch err := r.ioctl(&r.q, nil); err {
	case nil:
	case unix.ENOENT:
		return nil, r.fail(fmt.Sprintf("has no VMA at %#x", addr), "PROCMAP_QUERY", err)
	case unix.ESRCH:
		return nil, r.fail("has exited", "PROCMAP_QUERY", err)
	default:
		return nil, r.fail(fmt.Sprintf("cannot be queried at %#x", addr), "PROCMAP_QUERY", err)
	}
	if r.q.BuildIDSize == 0 {
		return nil, nil
	}
	return bytes.Clone(buf[:r.q.BuildIDSize]), nil
}

// RawQuery runs PROCMAP_QUERY with q as given and returns the bare errno:
// for callers that want the kernel's exact answers. Any buffer addresses in
// q must stay valid and pinned for the call.
func (r *Reader) RawQuery(q *uapi.ProcmapQuery) error {
	return r.ioctl(q, nil)
}

// KernelThread reports whether the process is a kernel thread: it has no
// address space, and its maps are empty.
func (r *Reader) KernelThread() bool { return isKernelThread(r.pid) }

// pfKthread is PF_KTHREAD of include/linux/sched.h, in the flags field of
// /proc/PID/stat.
const pfKthread = 0x00200000

// isKernelThread reports whether pid is a kernel thread, which has no mm and
// so an empty maps file. It reads the ninth field of /proc/PID/stat, after
// the command name in parentheses (which may itself hold spaces and ')').
func isKernelThread(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfKthread != 0
}
