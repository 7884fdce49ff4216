package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"mmlab/experiment"
	"mmlab/uapi"

	"mmlab/live/procmaps"
)

func init() {
	register(&command{
		name:    "maps",
		summary: "print a live process's VMAs as /proc/PID/maps does, by text or PROCMAP_QUERY",
		run:     runMaps,
	})
}

const mapsUsage = `usage: mmlab maps PID [--via query|text] [--addr A] [--json]

Prints the VMAs of process PID, line for line as /proc/PID/maps prints them,
read in one of two ways:

  --via text   stream the /proc/PID/maps text and parse it (the default for
               a full listing: the faster way to read every VMA)
  --via query  one PROCMAP_QUERY ioctl per VMA (Linux 6.11+). The ioctl sees
               only the VMAs of the process's mm, so the gate VMA [vsyscall],
               which the text prints last, is absent (a note on stderr says so)

  --addr A     print only the VMA that covers address A (hex with 0x, or
               decimal): one PROCMAP_QUERY lookup (by default; a scan of the
               text before Linux 6.11), or with --via text a scan of the text.
               No VMA there: exit status 1 and an ENOENT error
  --json       one JSON object per line and VMA, with the procmap_query field
               names: vma_start, vma_end, vma_offset ("0x..." strings), perms
               ("r-xp"), dev_major, dev_minor, inode, name (null if none) and,
               when PROCMAP_QUERY gave it, vma_page_size

Reading another user's process needs the right to ptrace it (root can).
Errors name the process and the errno (ESRCH, EACCES, ENOENT...).

A kernel thread has no address space: its listing is empty, as its
/proc/PID/maps is, with a note on stderr, by either --via (exit status 0);
with --addr it is an error.

Exit status: 0 listed, 1 the process could not be read (or no VMA at
--addr), 2 bad usage, 130 interrupted.
`

func runMaps(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("maps", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	via := fs.String("via", "", "") // "": text for a walk, the ioctl for --addr
	addrFlag := fs.String("addr", "", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagsFailed(err, func() { fmt.Fprint(os.Stdout, mapsUsage) },
			func(err error) { fmt.Fprintf(os.Stderr, "mmlab maps: %v\n\n%s", err, mapsUsage) })
	}
	if len(pos) != 1 {
		fmt.Fprintf(os.Stderr, "mmlab maps: want one PID, not %d arguments\n\n%s", len(pos), mapsUsage)
		return experiment.ExitUsage
	}
	if *via != "" && *via != "text" && *via != "query" {
		fmt.Fprintf(os.Stderr, "mmlab maps: --via %q: want text or query\n", *via)
		return experiment.ExitUsage
	}
	pid, err := strconv.Atoi(pos[0])
	if err != nil || pid <= 0 {
		fmt.Fprintf(os.Stderr, "mmlab maps: PID must be a positive number, not %q\n", pos[0])
		return experiment.ExitUsage
	}
	var addr uint64
	if *addrFlag != "" {
		if addr, err = strconv.ParseUint(*addrFlag, 0, 64); err != nil {
			fmt.Fprintf(os.Stderr, "mmlab maps: --addr %q is not an address\n", *addrFlag)
			return experiment.ExitUsage
		}
	}

	r, err := procmaps.Open(pid)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mmlab maps: %v\n", err)
		return experiment.ExitFailed
	}
	defer r.Close()
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	defer w.Flush()
	var line []byte
	print := func(v *uapi.VMA) {
		if *asJSON {
			line = v.AppendJSON(line[:0])
		} else {
			line = v.AppendText(line[:0])
		}
		w.Write(line)
	}

	if *addrFlag != "" {
		lookup := r.Lookup
		if *via == "text" {
			lookup = r.LookupText
		}
		v, err := lookup(addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mmlab maps: %v\n", err)
			return experiment.ExitFailed
		}
		print(v)
		return experiment.ExitOK
	}

	if r.KernelThread() {
		// /proc/PID/maps of a kernel thread is empty: so is stdout.
		fmt.Fprintf(os.Stderr, "mmlab maps: note: process %d is a kernel thread: it has no address space, so it has no VMAs\n", pid)
		return experiment.ExitOK
	}
	walk := r.Walk
	if *via == "query" {
		walk = r.WalkQuery
		fmt.Fprintf(os.Stderr, "mmlab maps: note: the PROCMAP_QUERY walk lists only the VMAs of the mm; the gate VMA [vsyscall] that /proc/%d/maps prints last is not one of them and is left out\n", pid)
	}
	interrupted := false
	err = walk(func(v *uapi.VMA) bool {
		if ctx.Err() != nil {
			interrupted = true
			return false
		}
		print(v)
		return true
	})
	if err != nil {
		w.Flush()
		fmt.Fprintf(os.Stderr, "mmlab maps: %v\n", err)
		return experiment.ExitFailed
	}
	if interrupted {
		return experiment.ExitInterrupted
	}
	return experiment.ExitOK
}
