package mm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forkShapeC builds, in a real process, the shape forkShape builds in the
// model (500 private anonymous RW VMAs of 20 written pages, each followed by
// a PROT_NONE guard page: 1,000 VMAs, 10,000 resident pages), then times
// argv[1] fork() calls (the child _exits at once; the parent waits, outside
// the timed part) and prints the total nanoseconds.
const forkShapeC = `
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
	long n = atol(argv[1]), vmas = 500, per = 20;
	unsigned long base = 0x100000000000UL;
	for (long i = 0; i < vmas; i++) {
		char *a = (char *)(base + i * (per + 1) * 4096UL);
		if (mmap(a, (per + 1) * 4096, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != a)
			return 1;
		for (long p = 0; p < per; p++)
			a[p * 4096] = 1;
		if (mprotect(a + per * 4096, 4096, PROT_NONE))
			return 1;
	}
	long long total = 0;
	for (long i = 0; i < n; i++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		pid_t pid = fork();
		if (pid == 0)
			_exit(0);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (pid < 0)
			return 1;
		waitpid(pid, NULL, 0);
		total += (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
	}
	printf("%lld\n", total);
	return 0;
}
`

// BenchmarkForkLive times fork() of a live process of the same shape as
// BenchmarkFork's model address space (run both in one go: -bench Fork).
// It needs a C compiler.
func BenchmarkForkLive(b *testing.B) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		b.Skip("the live fork benchmark needs a C compiler (cc)")
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "forkshape.c")
	if err := os.WriteFile(src, []byte(forkShapeC), 0o600); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "forkshape")
	if out, err := exec.Command(cc, "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		b.Fatalf("cc: %v\n%s", err, out)
	}
	b.ResetTimer()
	out, err := exec.Command(bin, strconv.Itoa(b.N)).Output()
	if err != nil {
		b.Fatalf("forkshape: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(ns)/float64(b.N), "fork-ns/op")
}
