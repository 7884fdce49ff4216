package maptear

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// childEnv, when set, makes any binary importing this package run the
// modifier child instead of its main (from the init function below).
const childEnv = "MMLAB_MAPTEAR_CHILD"

// childCPUEnv, if set, is the CPU the child pins its modifier thread to.
const childCPUEnv = "MMLAB_MAPTEAR_CPU"

// The child's layout, as in proc-maps-race.c: nPieces anonymous private
// VMAs of piecePages pages each, alternating RW and R so that neighbours
// never merge, never touched (no page faults, so a split piece can always
// merge back). They sit at a fixed low address (tried from regionBases),
// below the Go heap arenas at 0xc000000000 and above a non-PIE binary:
// whatever the Go runtime maps later lands elsewhere and, in address order,
// after them, so it cannot move the chunk boundary.
const (
	nPieces    = 129
	piecePages = 3
)

var regionBases = []uintptr{0x200000000, 0x300000000, 0x400000000, 0x800000000}

func init() {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
}

func sysMmap(addr, length uintptr, prot, flags int) (uintptr, error) {
	r, _, e := unix.Syscall6(unix.SYS_MMAP, addr, length, uintptr(prot), uintptr(flags), ^uintptr(0), 0)
	if e != 0 {
		return 0, e
	}
	return r, nil
}

func sysMremap(old, oldSize, newSize uintptr, flags int, newAddr uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_MREMAP, old, oldSize, newSize, uintptr(flags), newAddr, 0)
	if e != 0 {
		return e
	}
	return nil
}

func sysMprotect(addr, length uintptr, prot int) error {
	_, _, e := unix.Syscall(unix.SYS_MPROTECT, addr, length, uintptr(prot))
	if e != 0 {
		return e
	}
	return nil
}

// childCase is one modification of the VMA at addr (whose protection is
// prot); next is the start of the VMA after it.
type childCase struct {
	name       string
	addr, next uintptr
	prot       int
	page       uintptr
}

const anonFixed = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_FIXED

// modify and restore are the three pairs of proc-maps-race.c.
func (c *childCase) modify() error {
	p := c.page
	switch c.name {
	case "split": // map the first page anew with PROT_NONE: [addr,+1P) [addr+1P,+3P)
		_, err := sysMmap(c.addr, p, unix.PROT_NONE, anonFixed)
		return err
	case "resize": // shrink in place to one page
		return sysMremap(c.addr, 3*p, p, 0, 0)
	case "remap": // move the next VMA's last page onto the middle page
		return sysMremap(c.next+2*p, p, p, unix.MREMAP_FIXED|unix.MREMAP_MAYMOVE|unix.MREMAP_DONTUNMAP, c.addr+p)
	}
	return unix.EINVAL
}

func (c *childCase) restore() error {
	p := c.page
	switch c.name {
	case "split": // the first page again with the original protection: merges back
		_, err := sysMmap(c.addr, p, c.prot, anonFixed)
		return err
	case "resize": // grow back in place (the two pages after it are free)
		return sysMremap(c.addr, p, 3*p, 0, 0)
	case "remap": // give the middle page the original protection: merges back
		return sysMprotect(c.addr+p, p, c.prot)
	}
	return unix.EINVAL
}

// childMain maps the pieces, says "ready BASE PIECES PAGES", and obeys one
// command per line on stdin, answering "ok" or "err ..." on stdout:
//
//	case NAME ADDR NEXT PROT  choose the modification
//	m / r                     modify / restore once
//	g                         modify and restore back to back, as fast as
//	                          possible, until the next line arrives (send
//	                          "s"); it stops restored and answers then
//	s                         nothing, no answer: the line that stops g
//	q                         exit (so does EOF on stdin)
func childMain() int {
	if cpu, err := strconv.Atoi(os.Getenv(childCPUEnv)); err == nil {
		// The modifier runs on this thread (init runs on the main goroutine).
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			fmt.Printf("err sched_setaffinity CPU %d: %v\n", cpu, err)
			return 1
		}
	}
	page := uintptr(os.Getpagesize())
	size := nPieces * piecePages * page
	var base uintptr
	var err error
	for _, b := range regionBases {
		if base, err = sysMmap(b, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE); err == nil {
			break
		}
	}
	if err != nil {
		fmt.Printf("err mmap of the pieces: %s\n", unix.ErrnoName(err.(unix.Errno)))
		return 1
	}
	for i := uintptr(1); i < nPieces; i += 2 {
		if err := sysMprotect(base+i*piecePages*page, piecePages*page, unix.PROT_READ); err != nil {
			fmt.Printf("err mprotect: %v\n", err)
			return 1
		}
	}
	fmt.Printf("ready %#x %d %d\n", base, nPieces, piecePages)

	in := bufio.NewReader(os.Stdin)
	var c childCase
	reply := func(err error) {
		if err != nil {
			os.Stdout.WriteString("err " + err.Error() + "\n")
			return
		}
		os.Stdout.WriteString("ok\n")
	}
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return 0
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "case":
			if len(f) != 5 {
				reply(fmt.Errorf("bad command %q", line))
				continue
			}
			addr, err1 := strconv.ParseUint(f[2], 0, 64)
			next, err2 := strconv.ParseUint(f[3], 0, 64)
			prot, err3 := strconv.Atoi(f[4])
			if err1 != nil || err2 != nil || err3 != nil {
				reply(fmt.Errorf("bad command %q", line))
				continue
			}
			c = childCase{name: f[1], addr: uintptr(addr), next: uintptr(next), prot: prot, page: page}
			reply(nil)
		case "m":
			reply(c.modify())
		case "r":
			reply(c.restore())
		case "g":
			reply(freeRun(&c, in))
		case "s":
		case "q":
			return 0
		default:
			reply(fmt.Errorf("unknown command %q", line))
		}
	}
}

// freeRun modifies and restores until a command is waiting on stdin, looking
// every 64 pairs.
func freeRun(c *childCase, in *bufio.Reader) error {
	fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
	for i := 1; ; i++ {
		if err := c.modify(); err != nil {
			return err
		}
		if err := c.restore(); err != nil {
			return err
		}
		if i%64 == 0 {
			if in.Buffered() > 0 {
				return nil
			}
			if n, _ := unix.Poll(fds, 0); n > 0 {
				return nil
			}
		}
	}
}
