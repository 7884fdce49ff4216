// SPDX-License-Identifier: GPL-2.0
/*
 * stray-int3-execonly: does a program's own int3 in execute-only memory
 * still raise SIGTRAP once a uprobe is installed in the process?
 *
 * The program puts "int3; ret" on an anonymous page and makes it
 * execute-only (PROT_EXEC alone: on x86 with protection keys the kernel
 * gives such a mapping its execute-only key), and the same bytes on a
 * read-execute page. It opens a perf uprobe (the "uprobe" PMU, no tracefs
 * needed) on a function of its own executable, for itself, so that the
 * kernel installs a breakpoint in its mm and sets MMF_HAS_UPROBES. Then,
 * for each page, a forked child (which inherits MMF_HAS_UPROBES) calls it
 * with SIGTRAP at its default action, and the parent follows the child
 * with ptrace: PTRACE_INTERRUPT stops it wherever it is; a SIGTRAP stop
 * means the int3 was delivered as a signal, a stop with the instruction
 * pointer on the int3 means the kernel rewound it without one (a child
 * still on its way to the call is resumed and stopped again).
 *
 * Build: cc -O2 -Wall -o stray-int3-execonly stray-int3-execonly.c
 * Run:   ./stray-int3-execonly      (as root: perf uprobes need it)
 *
 * Exit status: 1 the execute-only int3 was restarted without a signal
 * (the bug), 0 every int3 raised SIGTRAP, 2 the setup failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) void probed(void) { __asm__ volatile("nop"); }

static void die(const char *what)
{
	perror(what);
	exit(2);
}

/* The file offset of address a in this executable, from /proc/self/maps. */
static unsigned long exe_offset(unsigned long a)
{
	char exe[4096], line[4096 + 128];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	FILE *f = fopen("/proc/self/maps", "r");

	if (n < 0 || !f)
		die("/proc/self");
	exe[n] = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off;
		int path = 0;

		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &off, &path) >= 3 &&
		    a >= lo && a < hi && path && !strncmp(line + path, exe, n)) {
			fclose(f);
			return a - lo + off;
		}
	}
	fprintf(stderr, "%#lx is not in %s\n", a, exe);
	exit(2);
}

/* A perf uprobe on this executable's probed(), for this process only. */
static void open_uprobe(void)
{
	static char exe[4096];
	struct perf_event_attr attr = { .size = sizeof(attr) };
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (!f || fscanf(f, "%u", &attr.type) != 1 || n < 0)
		die("uprobe PMU");
	fclose(f);
	exe[n] = 0;
	attr.config1 = (uintptr_t)exe;
	attr.config2 = exe_offset((uintptr_t)probed);
	if (syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0) < 0)
		die("perf_event_open(uprobe)");
}

/* "int3; ret" on a fresh page with protection prot. */
static void (*int3_page(int prot))(void)
{
	unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	p[0] = 0xcc;
	p[1] = 0xc3;
	if (mprotect(p, 4096, prot))
		die("mprotect");
	return (void (*)(void))p;
}

/* 1 if a child calling f is found rewound onto f's int3, 0 if it takes SIGTRAP. */
static int restarted(void (*f)(void))
{
	pid_t pid = fork();
	int status, ret = -1;

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		signal(SIGTRAP, SIG_DFL);
		f();
		_exit(0);
	}
	if (ptrace(PTRACE_SEIZE, pid, 0, 0))
		goto reap; /* it died already: waitpid says how */
	while (ret < 0) {
		struct user_regs_struct regs;

		if (ptrace(PTRACE_INTERRUPT, pid, 0, 0))
			die("PTRACE_INTERRUPT");
		if (waitpid(pid, &status, __WALL) < 0)
			die("waitpid");
		if (!WIFSTOPPED(status))
			break;
		if (WSTOPSIG(status) == SIGTRAP && status >> 16 == 0) {
			ret = 0; /* its SIGTRAP's delivery stop */
			break;
		}
		if (ptrace(PTRACE_GETREGS, pid, 0, &regs))
			die("PTRACE_GETREGS");
		if (regs.rip == (uintptr_t)f)
			ret = 1;
		else if (ptrace(PTRACE_CONT, pid, 0, 0))
			die("PTRACE_CONT");
	}
	kill(pid, SIGKILL);
reap:
	if (ret < 0) {
		if (waitpid(pid, &status, __WALL) < 0)
			die("waitpid");
		if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGTRAP) {
			fprintf(stderr, "child ended with status %#x, not SIGTRAP\n", status);
			exit(2);
		}
		return 0;
	}
	waitpid(pid, &status, __WALL);
	return ret;
}

int main(void)
{
	void (*xonly)(void) = int3_page(PROT_EXEC);
	void (*rx)(void) = int3_page(PROT_READ | PROT_EXEC);
	int bug;

	if (restarted(xonly)) {
		fprintf(stderr, "--x int3 without a uprobe was not delivered\n");
		return 2;
	}
	open_uprobe();
	bug = restarted(xonly);
	printf("--x int3, uprobe in the mm: %s\n", bug ? "restarted at the int3, no SIGTRAP" : "SIGTRAP");
	printf("r-x int3, uprobe in the mm: %s\n", restarted(rx) ? "restarted at the int3, no SIGTRAP" : "SIGTRAP");
	return bug;
}
