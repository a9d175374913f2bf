/* smcr-run: runs PROGRAM with the smcr interposer (libsmcr-preload.so) so that its TCP
 * connections use SMC-R where the rules say so (docs/INTERPOSER.md, docs/CONFIG.md).
 *
 *   smcr-run [-d] [--rules FILE] [--devices SPEC] [--sndbuf N] [--rcvbuf N] [--sticky]
 *            [--] PROGRAM [ARGS]
 *
 * Appends the library to LD_PRELOAD (never replaces what is there), sets the SMCR_*
 * variables the options name, and execs PROGRAM (same pid). The preload cannot reach a
 * program that is statically linked (no dynamic loader), setuid/setgid (the loader ignores
 * LD_PRELOAD paths with slashes for those) or written in Go (raw system calls): smcr-run
 * says so on stderr and runs it unchanged. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fputs("usage: smcr-run [-d] [--rules FILE] [--devices SPEC] [--sndbuf N] [--rcvbuf N]\n"
	      "                [--sticky] [--] PROGRAM [ARGS]\n"
	      "  -d              debug log (SMCR_LOG=debug)\n"
	      "  --rules FILE    rules file (SMCR_CONFIG=FILE, docs/CONFIG.md)\n"
	      "  --devices SPEC  RDMA devices (SMCR_DEVICES=SPEC, default shm)\n"
	      "  --sndbuf N      default send buffer of SMC-R connections (SMCR_SNDBUF=N)\n"
	      "  --rcvbuf N      default receive ring (RMBE) (SMCR_RCVBUF=N)\n"
	      "  --sticky        keep the interposer across execs that scrub the environment\n",
	      f);
}

/* PROGRAM as execvp would find it (for the checks; the exec itself uses execvp). */
static bool find_prog(const char *prog, char *out, size_t n)
{
	if (strchr(prog, '/'))
		return snprintf(out, n, "%s", prog) < (int)n && access(out, X_OK) == 0;
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *c = strchr(path, ':');
		size_t l = c ? (size_t)(c - path) : strlen(path);
		if (snprintf(out, n, "%.*s/%s", (int)l, l ? path : ".", prog) < (int)n &&
		    access(out, X_OK) == 0)
			return true;
		path += l + (c ? 1 : 0);
	}
	return false;
}

/* Why the preload cannot reach the ELF file at path, or NULL if it can (or it is no ELF:
 * a script, whose interpreter is dynamic as a rule). */
static const char *unreachable(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)))
		return "it is setuid or setgid (the dynamic loader ignores LD_PRELOAD paths for it)";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	const char *why = NULL;
	Elf64_Ehdr eh;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
		goto out;
	bool interp = false;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != (ssize_t)sizeof(ph))
			goto out;
		if (ph.p_type == PT_INTERP)
			interp = true;
		if (ph.p_type == PT_NOTE && ph.p_filesz < 65536) {
			/* Go's linker writes a note named "Go" (its build ID) */
			char buf[65536];
			ssize_t r = pread(fd, buf, ph.p_filesz, (off_t)ph.p_offset);
			for (size_t o = 0; r > 0 && o + 12 <= (size_t)r;) {
				Elf64_Nhdr nh;
				memcpy(&nh, buf + o, sizeof(nh));
				size_t name_off = o + 12, nsz = (nh.n_namesz + 3u) & ~3u,
				       dsz = (nh.n_descsz + 3u) & ~3u;
				if (name_off + nsz > (size_t)r)
					break;
				if (nh.n_namesz == 3 && !memcmp(buf + name_off, "Go", 3)) {
					why = "it is a Go program (raw system calls, no libc sockets)";
					goto out;
				}
				o = name_off + nsz + dsz;
			}
		}
	}
	if (!interp)
		why = "it is statically linked (no dynamic loader)";
out:
	close(fd);
	return why;
}

/* The library: $SMCR_PRELOAD_LIB, beside this program, ../lib (installed), the build. */
static bool find_lib(char *out, size_t n)
{
	const char *env = getenv("SMCR_PRELOAD_LIB");
	if (env && *env)
		return snprintf(out, n, "%s", env) < (int)n && access(out, R_OK) == 0;
	char self[PATH_MAX];
	ssize_t l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (l > 0) {
		self[l] = 0;
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			const char *rel[] = { "/libsmcr-preload.so", "/../lib/libsmcr-preload.so",
					      "/../lib/smcr/libsmcr-preload.so" };
			for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++)
				if (snprintf(out, n, "%s%s", self, rel[i]) < (int)n &&
				    access(out, R_OK) == 0) {
					char *r = realpath(out, NULL);
					if (r && strlen(r) < n)
						strcpy(out, r);
					free(r);
					return true;
				}
		}
	}
#ifdef SMCR_PRELOAD_BUILD_PATH
	if (snprintf(out, n, "%s", SMCR_PRELOAD_BUILD_PATH) < (int)n && access(out, R_OK) == 0)
		return true;
#endif
	return false;
}

static int set_or_die(const char *name, const char *val)
{
	if (setenv(name, val, 1) < 0) {
		perror("smcr-run: setenv");
		exit(127);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "-d")) {
			set_or_die("SMCR_LOG", "debug");
		} else if (!strcmp(a, "--sticky")) {
			set_or_die("SMCR_STICKY", "1");
		} else if (!strcmp(a, "--rules") || !strcmp(a, "--devices") ||
			   !strcmp(a, "--sndbuf") || !strcmp(a, "--rcvbuf")) {
			if (!v) {
				fprintf(stderr, "smcr-run: %s needs a value\n", a);
				return 127;
			}
			const char *name = !strcmp(a, "--rules")     ? "SMCR_CONFIG"
					   : !strcmp(a, "--devices") ? "SMCR_DEVICES"
					   : !strcmp(a, "--sndbuf")  ? "SMCR_SNDBUF"
								     : "SMCR_RCVBUF";
			if (!strcmp(a, "--rules") && access(v, R_OK) != 0) {
				fprintf(stderr, "smcr-run: cannot read rules file %s: %s\n", v,
					strerror(errno));
				return 127;
			}
			set_or_die(name, v);
			i++;
		} else if (a[0] == '-') {
			fprintf(stderr, "smcr-run: unknown option %s\n", a);
			usage(stderr);
			return 127;
		} else {
			break;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return 127;
	}
	char path[PATH_MAX];
	const char *why = find_prog(argv[i], path, sizeof(path)) ? unreachable(path) : NULL;
	char lib[PATH_MAX];
	if (why) {
		fprintf(stderr, "smcr-run: warning: %s: %s; running it without smcr (plain TCP)\n",
			argv[i], why);
	} else if (!find_lib(lib, sizeof(lib))) {
		fprintf(stderr, "smcr-run: warning: libsmcr-preload.so not found (set "
				"SMCR_PRELOAD_LIB); running %s without smcr\n", argv[i]);
	} else {
		const char *old = getenv("LD_PRELOAD");
		if (old && *old) {
			size_t n = strlen(old) + strlen(lib) + 2;
			char *v = malloc(n);
			if (!v)
				return 127;
			snprintf(v, n, "%s:%s", old, lib);
			set_or_die("LD_PRELOAD", v);
			free(v);
		} else {
			set_or_die("LD_PRELOAD", lib);
		}
	}
	execvp(argv[i], argv + i);
	fprintf(stderr, "smcr-run: %s: %s\n", argv[i], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
