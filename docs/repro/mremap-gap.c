// SPDX-License-Identifier: GPL-2.0
/*
 * mremap-gap: does /proc/PID/maps or PROCMAP_QUERY miss a VMA while
 * mremap(MREMAP_MAYMOVE|MREMAP_FIXED) moves a page onto it?
 *
 * A child process maps three one-page VMAs (rw-, r-x, r--; the middle one is
 * the destination) and a spare page, then moves the spare onto the
 * destination and maps the spare again, over and over. The destination's
 * address is mapped before and after every move. The parent reads the
 * child's whole /proc/PID/maps text (one read() per page, as a maps scanner
 * does) and asks PROCMAP_QUERY about the destination, until it sees a read
 * or a query that misses the destination, or the time is up.
 *
 * Layouts (-l), as in mmlab's explorer and its maptear gap cases:
 *   far       a written spare far from the destination (the default)
 *   adjacent  a written spare just left of the destination, not merged
 *   split     an unwritten rw- spare onto the second page of a two-page rw-
 *             VMA (the move splits it; the page merges back)
 *   merged    an unwritten spare just right of the destination and merged
 *             with it (the unmap of the destination splits their VMA)
 *   fixed     mmap(MAP_FIXED) over the destination instead of mremap
 *   none      no modifier
 *
 * Build: cc -O2 -Wall -pthread -o mremap-gap mremap-gap.c
 * Run:   ./mremap-gap [-l layout] [-t seconds] [-a] [-v]
 *
 * It stops at the first gap; -a runs the whole time and counts them all
 * (text and query), -v prints each text read that missed the destination.
 *
 * Exit status: 1 a gap was seen (query or text), 0 none was seen in the
 * time given, 2 the test cannot run here (the reason is printed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

#ifndef PROCMAP_QUERY
/*
 * The installed headers predate Linux 6.11: the ioctl's ABI, as
 * Documentation and include/uapi/linux/fs.h describe it.
 */
struct procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#endif

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

enum { LEFT, DST, RIGHT, END };	/* pages from the base */
#define FAR_PAGES 0x10000	/* the far spare: 256 MiB above, 4 KiB pages */

struct layout {
	const char *name;
	/* the arena: up to three mappings, in pages from the base */
	struct { int page, pages, prot; } maps[3];
	int nmaps;
	int lo, hi;		/* pages mapped throughout */
	long spare;		/* page moved onto DST; -1: no mremap */
	int prot;		/* the spare's (or the MAP_FIXED mapping's) */
	bool write;		/* write the spare before each move */
	bool fixed;		/* mmap(MAP_FIXED) over DST instead */
};

#define RW (PROT_READ | PROT_WRITE)
#define RX (PROT_READ | PROT_EXEC)
#define RO PROT_READ

static const struct layout layouts[] = {
	{ "far", { { LEFT, 1, RW }, { DST, 1, RX }, { RIGHT, 1, RO } }, 3, LEFT, END, FAR_PAGES, RW, true, false },
	{ "adjacent", { { LEFT, 1, RW }, { DST, 1, RX }, { RIGHT, 1, RO } }, 3, DST, END, LEFT, RW, true, false },
	{ "split", { { LEFT, 2, RW }, { RIGHT, 1, RO } }, 2, LEFT, END, FAR_PAGES, RW, false, false },
	{ "merged", { { LEFT, 1, RO }, { DST, 2, RW } }, 2, LEFT, RIGHT, RIGHT, RW, false, false },
	{ "fixed", { { LEFT, 1, RW }, { DST, 1, RX }, { RIGHT, 1, RO } }, 3, LEFT, END, -1, RX, false, true },
	{ "none", { { LEFT, 1, RW }, { DST, 1, RX }, { RIGHT, 1, RO } }, 3, LEFT, END, -1, 0, false, false },
};

static const uintptr_t bases[] = { 0x600000000UL, 0x700000000UL, 0x900000000UL, 0xa00000000UL };

static long page;
static uintptr_t base;

static uintptr_t at(long pg) { return base + pg * page; }

static void cannot(const char *why)
{
	fprintf(stderr, "mremap-gap: cannot run: %s\n", why);
	exit(2);
}

/* Is [base, base + pages) free in this process? */
static bool free_range(uintptr_t b, long pages)
{
	void *p = mmap((void *)b, pages * page, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		return false;
	munmap(p, pages * page);
	return p == (void *)b;	/* kernels before 4.17 take the flag as a hint */
}

static int map_anon(uintptr_t addr, long pages, int prot)
{
	void *p = mmap((void *)addr, pages * page, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

	return p == MAP_FAILED ? -1 : 0;
}

static void setup(const struct layout *l)
{
	for (int i = 0; i < l->nmaps; i++)
		if (map_anon(at(l->maps[i].page), l->maps[i].pages, l->maps[i].prot))
			cannot("mmap of the arena failed");
	if (l->spare >= END && map_anon(at(l->spare), 1, l->prot))
		cannot("mmap of the spare failed");
}

/* One change of the destination; 0 on success. */
static int modify(const struct layout *l)
{
	uintptr_t spare = at(l->spare);

	if (l->fixed)
		return map_anon(at(DST), 1, l->prot);
	if (l->spare < 0)
		return 0;
	if (l->write)
		*(volatile char *)spare = 1;
	if (mremap((void *)spare, page, page, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)at(DST)) == MAP_FAILED)
		return -1;
	return map_anon(spare, 1, l->prot);
}

/* The control block the parent and the child share. */
struct ctl {
	volatile int ready;	/* the child mapped the layout */
	volatile int go;	/* the parent calibrated: modify */
	volatile int err;	/* the child's errno if a change failed */
	volatile long moves;
};

static int child(const struct layout *l, struct ctl *c)
{
	setup(l);
	__atomic_store_n(&c->ready, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&c->go, __ATOMIC_ACQUIRE))
		;
	for (;;) {
		if (modify(l)) {
			c->err = errno;
			return 1;
		}
		c->moves++;
	}
}

static char *text;
static size_t text_cap;

/* Read the whole maps file, one read() of a page at a time. */
static ssize_t read_maps(int fd)
{
	size_t n = 0;

	if (lseek(fd, 0, SEEK_SET) < 0)
		return -1;
	for (;;) {
		ssize_t r;

		if (text_cap - n < (size_t)page + 1) {
			text_cap = text_cap ? 2 * text_cap : 16 * page;
			text = realloc(text, text_cap);
			if (!text)
				cannot("out of memory");
		}
		r = read(fd, text + n, page);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		n += r;
	}
	text[n] = 0;
	return n;
}

/* The first address of [lo, hi) no line of the text covers, 0 if none. */
static uintptr_t text_miss(uintptr_t lo, uintptr_t hi)
{
	for (char *line = text; *line; ) {
		unsigned long start, end;
		char *nl = strchr(line, '\n');

		if (sscanf(line, "%lx-%lx", &start, &end) == 2 && end > lo) {
			if (start > lo)
				return lo;
			lo = end;
			if (lo >= hi)
				return 0;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	return lo;
}

/* PROCMAP_QUERY of addr: 0 found covering, ENOENT, or another errno. */
static int query(int fd, uintptr_t addr)
{
	struct procmap_query q;

	memset(&q, 0, sizeof(q));
	q.size = sizeof(q);
	q.query_addr = addr;
	if (ioctl(fd, PROCMAP_QUERY, &q))
		return errno;
	if (q.vma_start > addr || q.vma_end <= addr)
		return ERANGE;
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(void)
{
	fprintf(stderr, "usage: mremap-gap [-l far|adjacent|split|merged|fixed|none] [-t seconds] [-a] [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const struct layout *l = &layouts[0];
	double secs = 10;
	bool verbose = false, all = false;
	char path[64];
	struct ctl *c;
	pid_t pid;
	int opt, fd, err;
	long reads = 0, queries = 0, text_gaps = 0, query_gaps = 0;
	uintptr_t lo, hi;

	while ((opt = getopt(argc, argv, "l:t:av")) != -1) {
		switch (opt) {
		case 'l':
			l = NULL;
			for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
				if (!strcmp(optarg, layouts[i].name))
					l = &layouts[i];
			if (!l)
				usage();
			break;
		case 't':
			secs = atof(optarg);
			if (secs <= 0)
				usage();
			break;
		case 'a':
			all = true;
			break;
		case 'v':
			verbose = true;
			break;
		default:
			usage();
		}
	}
	page = sysconf(_SC_PAGESIZE);
	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]) && !base; i++)
		if (free_range(bases[i], END) && free_range(bases[i] + FAR_PAGES * page, 1))
			base = bases[i];
	if (!base)
		cannot("no free address range for the layout (or MAP_FIXED_NOREPLACE unsupported)");
	lo = at(l->lo);
	hi = at(l->hi);

	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		cannot("mmap of the control block failed");
	pid = fork();
	if (pid < 0)
		cannot("fork failed");
	if (pid == 0)
		_exit(child(l, c));
	while (!__atomic_load_n(&c->ready, __ATOMIC_ACQUIRE))
		if (waitpid(pid, NULL, WNOHANG) == pid)
			cannot("the child exited before it was ready");

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		kill(pid, SIGKILL);
		cannot("cannot open the child's /proc/PID/maps");
	}
	/* Calibrate with the modifier stopped: the text covers, the query finds. */
	err = query(fd, at(DST));
	if (err) {
		kill(pid, SIGKILL);
		if (err == ENOTTY || err == EINVAL)
			cannot("no PROCMAP_QUERY ioctl on /proc/PID/maps (Linux 6.11+)");
		fprintf(stderr, "mremap-gap: PROCMAP_QUERY with the modifier stopped: %s\n", strerror(err));
		exit(2);
	}
	if (read_maps(fd) < 0 || text_miss(lo, hi)) {
		kill(pid, SIGKILL);
		cannot("the layout is not in the maps text with the modifier stopped");
	}

	printf("mremap-gap: layout %s at %#lx, destination %#lx, %.1f s\n", l->name, (unsigned long)base,
	       (unsigned long)at(DST), secs);
	__atomic_store_n(&c->go, 1, __ATOMIC_RELEASE);
	for (double end = now() + secs; now() < end && (all || !(text_gaps || query_gaps)); ) {
		uintptr_t miss;

		if (read_maps(fd) < 0) {
			kill(pid, SIGKILL);
			cannot("read of /proc/PID/maps failed");
		}
		reads++;
		miss = text_miss(lo, hi);
		if (miss) {
			if (!text_gaps++ || verbose)
				printf("text read %ld: no line covers %#lx, mapped throughout\n", reads, (unsigned long)miss);
			if (verbose)
				fputs(text, stdout);
		}
		queries++;
		err = query(fd, at(DST));
		if (err == ENOENT) {
			if (!query_gaps++ || verbose)
				printf("query %ld: PROCMAP_QUERY(%#lx): ENOENT, mapped throughout\n", queries,
				       (unsigned long)at(DST));
		} else if (err) {
			kill(pid, SIGKILL);
			fprintf(stderr, "mremap-gap: PROCMAP_QUERY: %s\n", strerror(err));
			exit(2);
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			fprintf(stderr, "mremap-gap: the modifier failed: %s\n", strerror(c->err));
			exit(2);
		}
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("%ld moves, %ld text reads, %ld queries: ", c->moves, reads, queries);
	if (text_gaps || query_gaps) {
		printf("GAP: %ld text reads (%.1f%%) and %ld queries (%.1f%%) missed the destination\n",
		       text_gaps, 100.0 * text_gaps / reads, query_gaps, 100.0 * query_gaps / queries);
		return 1;
	}
	printf("no gap\n");
	return 0;
}
