/*
 * The live replay helper of mmlab (live/replay). mmlab compiles it with the
 * system C compiler and runs it in a fresh process group. It reads a decoded
 * op table on stdin, then runs the ops with real system calls, a real fork()
 * whose child goes on with the trace, and real loads and stores whose
 * SIGSEGV/SIGBUS is caught with sigsetjmp/siglongjmp.
 *
 * Input (all numbers decimal):
 *   arena LO HI
 *   dir PATH                 the directory of the trace's files (one line)
 *   files N, then N lines    NAME, opened O_RDWR once each, here, before any op
 *   ops N, then N lines      KIND LINE ADDR LEN PROT FLAGS FILE+1 OFF NEWLEN NEWADDR VALUE SKIP
 *                            (FILE+1 is 0 for anonymous memory)
 * Output on stdout, one line each:
 *   error LINE ERRNO         an op the kernel refused (mmlab prints the errno's name)
 *   error LINE SIGSEGV SEGV_MAPERR|SEGV_ACCERR|SEGV_PKUERR, error LINE SIGBUS BUS_ADRERR
 *   error LINE notret        an exec whose mapped byte is not a ret: nothing ran
 *   peek 0xADDR VALUE
 *   maps lines of /proc/self/maps overlapping the arena, file paths as NAME, then ""
 * Exit status: 0 when the trace ran; 3 on bad input or setup failure; 4 when a
 * forked child died; 7 when the arena holds a mapping of the helper's own
 * (its stack, placed at random: mmlab runs it again).
 *
 * Nothing allocates memory once the ops run: output and /proc reads use static
 * buffers, so nothing of the helper's own lands in the arena (checked at start).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum { K_MMAP, K_MUNMAP, K_MPROTECT, K_MREMAP, K_TOUCH, K_POKE, K_PEEK, K_FORK, K_EXIT, K_MAPS, K_EXEC, K_WRITE };

struct op {
	int kind, line, prot, flags, file;
	unsigned long long addr, len, off, newlen, newaddr;
	unsigned value;
	long skip;
};

static unsigned long long arena_lo, arena_hi;
static char dir[4096];
static size_t dirlen;
static int nfiles;
static char (*names)[80];
static int *fds;
static struct op *ops;
static long nops;

static char outbuf[1 << 16];
static size_t outlen;

static void flush(void)
{
	size_t done = 0;
	while (done < outlen) {
		ssize_t n = write(1, outbuf + done, outlen - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(5); /* stdout gone: mmlab was killed or cancelled */
		done += (size_t)n;
	}
	outlen = 0;
}

static void out(const char *s, size_t n)
{
	if (outlen + n > sizeof(outbuf))
		flush();
	while (n > sizeof(outbuf)) { /* never: lines are short */
		memcpy(outbuf, s, sizeof(outbuf));
		outlen = sizeof(outbuf);
		flush();
		s += sizeof(outbuf);
		n -= sizeof(outbuf);
	}
	memcpy(outbuf + outlen, s, n);
	outlen += n;
}

static void outf(const char *fmt, unsigned long long a, unsigned long long b)
{
	char line[128];
	int n = snprintf(line, sizeof(line), fmt, a, b);
	out(line, (size_t)n);
}

static void die(const char *msg)
{
	int err = errno;
	flush();
	if (err)
		fprintf(stderr, "replay helper: %s: %s\n", msg, strerror(err));
	else
		fprintf(stderr, "replay helper: %s\n", msg);
	_exit(3);
}

/* bad reports malformed input from mmlab. */
static void bad(const char *msg)
{
	errno = 0;
	die(msg);
}

/* maps_each streams /proc/self/maps line by line through fn. */
static void maps_each(void (*fn)(char *line, size_t n))
{
	static char buf[1 << 16];
	size_t have = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open /proc/self/maps");
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("read /proc/self/maps");
		if (n == 0)
			break;
		have += (size_t)n;
		size_t start = 0;
		for (size_t i = 0; i < have; i++) {
			if (buf[i] == '\n') {
				fn(buf + start, i + 1 - start);
				start = i + 1;
			}
		}
		memmove(buf, buf + start, have - start);
		have -= start;
		if (have == sizeof(buf))
			die("a maps line longer than 64 KiB");
	}
	close(fd);
}

static int overlaps_arena(const char *line)
{
	char *end;
	unsigned long long lo = strtoull(line, &end, 16);
	unsigned long long hi = strtoull(end + 1, NULL, 16);
	return lo < arena_hi && hi > arena_lo;
}

/* print_vma prints a maps line that overlaps the arena, with a trace file's
 * path replaced by its NAME; the bytes before the name (fields and the
 * kernel's padding) are kept as they are. */
static void print_vma(char *line, size_t n)
{
	if (!overlaps_arena(line))
		return;
	char *p = line;
	for (int k = 0; k < 5 && p; k++) { /* start-end perms offset dev inode */
		p = memchr(p, ' ', n - (size_t)(p - line));
		if (p)
			p++;
	}
	if (p) {
		while (*p == ' ')
			p++;
		if (strncmp(p, dir, dirlen) == 0 && p[dirlen] == '/') {
			out(line, (size_t)(p - line));
			p += dirlen + 1;
			out(p, n - (size_t)(p - line));
			return;
		}
	}
	out(line, n);
}

static int arena_busy;
static void check_vma(char *line, size_t n)
{
	(void)n;
	if (overlaps_arena(line) && !arena_busy++)
		fprintf(stderr, "replay helper: the arena already holds the helper's own %.*s", (int)n, line);
}

static sigjmp_buf fault_jb;
static volatile sig_atomic_t in_access;
static volatile int fault_code; /* si_code of the last caught fault */

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (!in_access) {
		/* A fault of the helper itself: die of it. */
		signal(sig, SIG_DFL);
		return;
	}
	in_access = 0;
	fault_code = si->si_code;
	siglongjmp(fault_jb, sig);
}

/* access_byte does one user-mode load, store or call (of a ret); it returns
 * 0, or the signal the access raised (its si_code in fault_code). */
static int access_byte(int kind, unsigned long long addr, unsigned char value, unsigned char *got)
{
	volatile unsigned char *p = (volatile unsigned char *)(unsigned long)addr;
	int sig = sigsetjmp(fault_jb, 1);
	if (sig)
		return sig;
	in_access = 1;
	if (kind == K_POKE)
		*p = value;
	else if (kind == K_EXEC)
		((void (*)(void))(unsigned long)addr)();
	else
		*got = *p;
	in_access = 0;
	return 0;
}

/* fault_line prints a caught fault: the signal and its si_code. */
static void fault_line(int line, int sig)
{
	const char *name = "SIGSEGV", *code = "?";
	if (sig == SIGBUS) {
		name = "SIGBUS";
		if (fault_code == BUS_ADRERR)
			code = "BUS_ADRERR";
	} else if (fault_code == SEGV_MAPERR) {
		code = "SEGV_MAPERR";
	} else if (fault_code == SEGV_ACCERR) {
		code = "SEGV_ACCERR";
	} else if (fault_code == 4) { /* SEGV_PKUERR */
		code = "SEGV_PKUERR";
	}
	char buf[96];
	int n = snprintf(buf, sizeof(buf), "error %d %s %s\n", line, name, code);
	out(buf, (size_t)n);
}

/* remote_byte reads the byte at addr through /proc/self/mem, as a debugger
 * does (FOLL_FORCE, no protection-key check); -1 when it cannot be read. It
 * opens the file each time: an open file keeps the mm it was opened on,
 * which a forked child does not share. */
static int remote_byte(unsigned long long addr)
{
	unsigned char b;
	int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open /proc/self/mem");
	ssize_t n = pread(fd, &b, 1, (off_t)addr);
	close(fd);
	return n == 1 ? b : -1;
}

static void op_error(int line, int err)
{
	outf("error %llu %llu\n", (unsigned long long)line, (unsigned long long)err);
}

static int is_child;
static int pipefd[2]; /* write's destination, drained after each write */

static void finish(void)
{
	flush();
	if (!is_child)
		for (int i = 0; i < nfiles; i++) {
			char path[4096 + 96];
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
			unlink(path);
		}
	_exit(0);
}

/* layout_ok runs the helper again, before it reads anything, when its
 * mappings would lie outside the zones trace.ProcessZones reserves for them:
 * those hold the default top-down layout with ASLR, which a personality
 * asking for the legacy layout or no randomization, or a stack rlimit over
 * 64 GiB (arch/x86/mm/mmap.c:mmap_base() leaves it as the gap below the
 * stack), would change. */
static void layout_ok(char **argv)
{
	int pers = personality(0xffffffff);
	struct rlimit rl;
	int again = 0;
	if (pers != -1 && (pers & (ADDR_COMPAT_LAYOUT | ADDR_NO_RANDOMIZE))) {
		if (personality((unsigned long)pers & ~(unsigned long)(ADDR_COMPAT_LAYOUT | ADDR_NO_RANDOMIZE)) == -1)
			die("personality");
		again = 1;
	}
	if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur > (1ULL << 36)) {
		rl.rlim_cur = 8 << 20;
		if (setrlimit(RLIMIT_STACK, &rl))
			die("setrlimit RLIMIT_STACK");
		again = 1;
	}
	if (again) {
		execv("/proc/self/exe", argv);
		die("execv /proc/self/exe");
	}
}

int main(int argc, char **argv)
{
	char word[16];
	(void)argc;
	layout_ok(argv);
	if (scanf("%15s %llu %llu", word, &arena_lo, &arena_hi) != 3 || strcmp(word, "arena"))
		bad("bad header: arena");
	if (scanf(" dir %4095[^\n]", dir) != 1)
		bad("bad header: dir");
	dirlen = strlen(dir);
	if (scanf(" files %d", &nfiles) != 1 || nfiles < 0)
		bad("bad header: files");
	names = calloc((size_t)nfiles + 1, sizeof(*names));
	fds = calloc((size_t)nfiles + 1, sizeof(*fds));
	for (int i = 0; i < nfiles; i++) {
		char path[4096 + 96];
		if (scanf(" %79s", names[i]) != 1)
			bad("bad file name");
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		fds[i] = open(path, O_RDWR | O_CLOEXEC);
		if (fds[i] < 0)
			die(path);
	}
	if (scanf(" ops %ld", &nops) != 1 || nops < 0)
		bad("bad header: ops");
	ops = calloc((size_t)nops + 1, sizeof(*ops));
	for (long i = 0; i < nops; i++) {
		struct op *o = &ops[i];
		if (scanf("%d %d %llu %llu %d %d %d %llu %llu %llu %u %ld", &o->kind, &o->line, &o->addr,
			  &o->len, &o->prot, &o->flags, &o->file, &o->off, &o->newlen, &o->newaddr,
			  &o->value, &o->skip) != 12)
			bad("bad op");
		o->file -= 1;
		if (o->file >= nfiles || o->skip > nops || o->skip < 0)
			bad("bad op fields");
	}
	errno = 0;
	maps_each(check_vma);
	if (arena_busy)
		_exit(7);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL) || sigaction(SIGBUS, &sa, NULL))
		die("sigaction");
	if (pipe2(pipefd, O_CLOEXEC))
		die("pipe");

	for (long i = 0; i < nops; i++) {
		struct op *o = &ops[i];
		void *a = (void *)(unsigned long)o->addr;
		unsigned char got = 0;
		int sig;
		switch (o->kind) {
		case K_MMAP: {
			int fd = o->file >= 0 ? fds[o->file] : -1;
			if (mmap(a, o->len, o->prot, o->flags, fd, (off_t)o->off) == MAP_FAILED)
				op_error(o->line, errno);
			break;
		}
		case K_MUNMAP:
			if (munmap(a, o->len))
				op_error(o->line, errno);
			break;
		case K_MPROTECT:
			if (mprotect(a, o->len, o->prot))
				op_error(o->line, errno);
			break;
		case K_MREMAP:
			if (mremap(a, o->len, o->newlen, o->flags, (void *)(unsigned long)o->newaddr) == MAP_FAILED)
				op_error(o->line, errno);
			break;
		case K_TOUCH:
		case K_POKE:
		case K_PEEK:
			sig = access_byte(o->kind, o->addr, (unsigned char)o->value, &got);
			if (sig)
				fault_line(o->line, sig);
			else if (o->kind == K_PEEK)
				outf("peek 0x%llx %llu\n", o->addr, got);
			break;
		case K_EXEC: {
			int b = remote_byte(o->addr);
			if (b >= 0 && b != 0xc3) {
				outf("error %llu notret\n", (unsigned long long)o->line, 0);
				break;
			}
			sig = access_byte(K_EXEC, o->addr, 0, &got);
			if (sig)
				fault_line(o->line, sig);
			break;
		}
		case K_WRITE: {
			ssize_t n = write(pipefd[1], a, 1);
			if (n < 0)
				op_error(o->line, errno);
			else if (n == 1 && read(pipefd[0], &got, 1) != 1)
				die("read the pipe");
			break;
		}
		case K_FORK: {
			flush();
			pid_t parent = getpid();
			pid_t pid = fork();
			if (pid < 0) {
				op_error(o->line, errno);
				i = o->skip - 1;
				break;
			}
			if (pid == 0) {
				is_child = 1;
				if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
					_exit(6);
				break;
			}
			int st;
			while (waitpid(pid, &st, 0) < 0)
				if (errno != EINTR)
					die("waitpid");
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr, "replay helper: the child forked at line %d died (status %#x)\n", o->line, st);
				_exit(4);
			}
			i = o->skip - 1; /* go on after the matching exit */
			break;
		}
		case K_EXIT:
			finish();
			break;
		case K_MAPS:
			maps_each(print_vma);
			out("\n", 1);
			break;
		default:
			bad("unknown op kind");
		}
	}
	finish();
	return 0;
}
