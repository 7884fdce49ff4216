// Package mapslock runs seed 003's mapslock probe (mmlab/experiment/mapslock)
// on the running kernel: a thread of this process write-protects a populated
// region with mprotect(2) while another asks PROCMAP_QUERY on
// /proc/self/maps, and each run is judged by the definition's Classify.
package mapslock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"mmlab/experiment"
	"mmlab/experiment/mapslock"
	"mmlab/live"
	"mmlab/live/procmaps"
	"mmlab/uapi"
)

// Run is the live runner of the experiment.
func Run(ctx context.Context, o *mapslock.Options, env experiment.Env, emit func(mapslock.Result)) error {
	if runtime.NumCPU() < 2 {
		return live.Unsupported("the probe needs two CPUs, one for mprotect and one for the queries; this machine has %d", runtime.NumCPU())
	}
	r, err := procmaps.Open(syscall.Getpid())
	if err != nil {
		return err
	}
	defer r.Close()
	rw := syscall.PROT_READ | syscall.PROT_WRITE
	region, err := syscall.Mmap(-1, 0, int(o.Size), rw, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", o.Size, err)
	}
	defer syscall.Munmap(region)
	other, err := syscall.Mmap(-1, 0, 4096, rw, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	defer syscall.Munmap(other)
	other[0] = 1
	probe := func(addr uint64) error {
		q := uapi.ProcmapQuery{Size: uapi.SizeofProcmapQuery, QueryAddr: addr}
		return r.RawQuery(&q)
	}
	if err := probe(addrOf(other)); errors.Is(err, syscall.ENOTTY) {
		return live.UnsupportedSince("6.11", "this kernel has no PROCMAP_QUERY")
	} else if err != nil {
		return err
	}
	for _, c := range o.Cases {
		addr := addrOf(other)
		if c == mapslock.CaseSame {
			addr = addrOf(region)
		}
		var runs []mapslock.Run
		for range o.Runs {
			if err := ctx.Err(); err != nil {
				return err
			}
			run, err := probeOnce(region, addr, probe)
			if err != nil {
				return err
			}
			runs = append(runs, run)
		}
		res := mapslock.Result{Row: experiment.LiveRow, Case: c, SizeBytes: uint64(o.Size)}
		res.Summarize(runs)
		env.Progress("%s: hold %.2f ms, query %.1f us, returned first in %.0f%% of %d probed runs", c, res.HoldMs, 1000*res.QueryMs, 100*res.First, res.Probed)
		emit(res)
	}
	return nil
}

func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

// probeOnce runs one mprotect(PROT_READ) of region on a thread of its own
// while this one queries addr, then makes region writable again (which
// makes its exclusive anonymous PTEs writable again, so the next mprotect
// has every PTE to change).
func probeOnce(region []byte, addr uint64, probe func(uint64) error) (mapslock.Run, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	type call struct {
		start time.Time
		hold  time.Duration
		err   error
	}
	var done atomic.Bool
	writerc := make(chan call, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t0 := time.Now()
		err := syscall.Mprotect(region, syscall.PROT_READ)
		writerc <- call{t0, time.Since(t0), err}
		done.Store(true)
	}()
	var times [][2]time.Time
	var qerr error
	for !done.Load() && qerr == nil {
		t0 := time.Now()
		qerr = probe(addr)
		times = append(times, [2]time.Time{t0, time.Now()})
	}
	w := <-writerc
	if err := syscall.Mprotect(region, syscall.PROT_READ|syscall.PROT_WRITE); err != nil && w.err == nil {
		w.err = err
	}
	if w.err != nil {
		return mapslock.Run{}, fmt.Errorf("mprotect: %w", w.err)
	}
	if qerr != nil {
		return mapslock.Run{}, fmt.Errorf("PROCMAP_QUERY %#x: %w", addr, qerr)
	}
	spans := make([]mapslock.Span, len(times))
	for i, t := range times {
		spans[i] = mapslock.Span{Start: t[0].Sub(w.start), End: t[1].Sub(w.start)}
	}
	return mapslock.Classify(w.hold, spans), nil
}
