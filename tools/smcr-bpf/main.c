/* smcr-bpf: installs, upgrades, removes and shows the smcr BPF programs that write and
 * read SMC-R's TCP option (docs/protocol/wire-formats.md 1, docs/protocol/linux-interop.md 3,
 * docs/parts/bpf.md).
 *
 *   smcr-bpf install   [--cgroup PATH] [--pin-dir DIR]   (mounts bpffs on DIR's parent if needed)
 *   smcr-bpf upgrade   [--pin-dir DIR]
 *   smcr-bpf uninstall [--pin-dir DIR]
 *   smcr-bpf status    [--pin-dir DIR]
 *
 * Installing is the one privileged step (CAP_BPF + CAP_NET_ADMIN, or root): one instance
 * of the three programs is attached with bpf_links to a cgroup v2 directory (by default
 * the root of the cgroup v2 hierarchy found in /proc/mounts, which covers every process
 * and every network namespace) and pinned, with the maps, in a bpffs directory (default
 * /sys/fs/bpf/smcr). Program and link pins are mode 0600: whoever can open them could
 * attach the programs elsewhere. Uninstall detaches each link (BPF_LINK_DETACH) before
 * removing its pin, so nothing is attached when it returns.
 *
 * Exit status: 0 done; 1 error; 2 usage; 3 not installed (status, uninstall, upgrade);
 * 4 refused because an instance is already installed. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/abi.h"
#include "smcr_opt.skel.h"

#ifndef SMCR_VERSION
#define SMCR_VERSION "0.0.0"
#endif
#define DEFAULT_PIN_DIR "/sys/fs/bpf/smcr"
#define BPF_FS_MAGIC_ 0xcafe4a11
#define CGROUP2_MAGIC_ 0x63677270

enum { EXIT_ERR = 1, EXIT_USAGE = 2, EXIT_NOT_INSTALLED = 3, EXIT_REFUSED = 4 };

/* The three programs, their attach types and pin names. */
struct prog_desc {
	const char *hook;     /* shown by status */
	const char *prog_pin; /* pin names inside the pin dir */
	const char *link_pin;
	const char *name; /* program name in the kernel (15 characters at most) */
	enum bpf_attach_type type;
};
static const struct prog_desc progs[3] = {
    {"sock_ops", "prog_sockops", "link_sockops", "smcr_sockops", BPF_CGROUP_SOCK_OPS},
    {"setsockopt", "prog_setsockopt", "link_setsockopt", "smcr_setsockopt", BPF_CGROUP_SETSOCKOPT},
    {"getsockopt", "prog_getsockopt", "link_getsockopt", "smcr_getsockopt", BPF_CGROUP_GETSOCKOPT},
};
static const char *const map_pins[4] = {"map_sk", "map_echo", "map_stats", "map_meta"};

/* Counter names, in enum smcr_bpf_ctr order (bpf/abi.h). */
static const char *const ctr_names[SMCR_C__COUNT] = {
    [SMCR_C_OPTIN] = "opt_in_requests",
    [SMCR_C_OPTIN_LATE] = "opt_in_too_late",
    [SMCR_C_ARM_CONNECT] = "clients_armed",
    [SMCR_C_ARM_LISTEN] = "listeners_armed",
    [SMCR_C_ARM_FAIL] = "arm_failures",
    [SMCR_C_SAVESYN_FAIL] = "save_syn_failures",
    [SMCR_C_SYN_WRITTEN] = "syn_options_written",
    [SMCR_C_SYN_NOSPACE] = "syn_no_space",
    [SMCR_C_SYNACK_ECHOED] = "synack_options_echoed",
    [SMCR_C_SYNACK_NOSPACE] = "synack_no_space",
    [SMCR_C_SYNACK_COOKIE] = "synack_syncookie_skips",
    [SMCR_C_SYNACK_NOSYN] = "synack_tfo_retransmit_echoes",
    [SMCR_C_ECHO_MAP_FAIL] = "echo_record_failures",
    [SMCR_C_SEEN_SYN] = "peer_syn_with_option",
    [SMCR_C_SEEN_SYNACK] = "peer_synack_with_option",
    [SMCR_C_CLIENT_SMC] = "client_smc",
    [SMCR_C_SERVER_SMC] = "server_smc",
    [SMCR_C_STATE_READ] = "state_reads",
};
_Static_assert(sizeof(ctr_names) / sizeof(ctr_names[0]) == SMCR_C__COUNT, "counter names");

static int verbose;

static void die_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die_msg(const char *fmt, ...)
{
	va_list ap;

	fputs("smcr-bpf: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !verbose)
		return 0;
	if (level == LIBBPF_INFO && verbose < 1)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void pin_path(char *buf, size_t n, const char *dir, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

static int path_exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

/* The cgroup v2 mount point, from /proc/mounts (hybrid layouts have it below
 * /sys/fs/cgroup/unified, unified ones at /sys/fs/cgroup). */
static int find_cgroup2(char *out, size_t n)
{
	FILE *f = fopen("/proc/mounts", "r");
	char dev[256], dir[4096], type[64];
	int found = -1;

	if (!f)
		return -errno;
	while (fscanf(f, "%255s %4095s %63s %*s %*d %*d", dev, dir, type) == 3) {
		if (strcmp(type, "cgroup2") == 0) {
			snprintf(out, n, "%s", dir);
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

static int fs_magic_is(const char *path, long magic)
{
	struct statfs sf;

	if (statfs(path, &sf) != 0)
		return 0;
	return (long)sf.f_type == magic;
}

/* Name of a loaded program, "" when it cannot be read. */
static void prog_name_by_id(__u32 id, char *name, size_t n)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(id);

	name[0] = 0;
	if (fd < 0)
		return;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
		snprintf(name, n, "%s", info.name);
	close(fd);
}

/* Whether a cgroup (effective: with its ancestors) has an smcr sock_ops program. */
static int cgroup_has_smcr(const char *path, __u32 query_flags)
{
	__u32 ids[64], cnt = 64, attach_flags = 0;
	char name[64];
	int fd = open(path, O_RDONLY | O_DIRECTORY), found = 0;

	if (fd < 0)
		return 0;
	if (bpf_prog_query(fd, BPF_CGROUP_SOCK_OPS, query_flags, &attach_flags, ids, &cnt) == 0) {
		for (__u32 i = 0; i < cnt && !found; i++) {
			prog_name_by_id(ids[i], name, sizeof(name));
			found = strcmp(name, progs[0].name) == 0;
		}
	}
	close(fd);
	return found;
}

/* Looks for an smcr program attached anywhere below path (depth-limited walk). */
static int subtree_has_smcr(const char *path, int depth, char *where, size_t n)
{
	DIR *d;
	struct dirent *e;
	char sub[4096];
	int found = 0;

	if (depth > 32)
		return 0;
	d = opendir(path);
	if (!d)
		return 0;
	while (!found && (e = readdir(d)) != NULL) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) >= sizeof(sub))
			continue;
		if (cgroup_has_smcr(sub, 0)) {
			snprintf(where, n, "%s", sub);
			found = 1;
		} else {
			found = subtree_has_smcr(sub, depth + 1, where, n);
		}
	}
	closedir(d);
	return found;
}

/* The pin dir's parent is no bpf filesystem (a system without systemd's mount of
 * /sys/fs/bpf, or a --pin-dir elsewhere): mount one there, as bpftool does for its pins,
 * and say so. Mode 0700: only root may walk to the pins. The directory is made if it is
 * missing (not below /sys, whose directories only the kernel makes). */
static int mount_bpffs(const char *dir)
{
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		die_msg("%s is not on a bpf filesystem and cannot be made: %s", dir, strerror(errno));
		return -1;
	}
	if (mount("bpf", dir, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700") != 0) {
		die_msg("%s is not on a bpf filesystem and mounting one failed: %s "
		        "(mount -t bpf bpf %s)",
		        dir, strerror(errno), dir);
		return -1;
	}
	printf("smcr-bpf: %s was not a bpf filesystem: mounted one there\n", dir);
	fflush(stdout);
	return 0;
}

static int chmod_pin(const char *dir, const char *name)
{
	char p[4096];

	pin_path(p, sizeof(p), dir, name);
	if (chmod(p, 0600) != 0) {
		die_msg("chmod %s: %s", p, strerror(errno));
		return -1;
	}
	return 0;
}

static void remove_pins(const char *dir)
{
	char p[4096];

	/* Links first, each detached explicitly before its pin goes. Unlinking the pin alone
	 * also detaches, but later: the bpffs inode is freed in an RCU callback that then
	 * queues the link's release on a workqueue, so right after unlink() the programs
	 * can still be attached (docs/parts/bpf.md "Install"). A
	 * reinstall in that window is refused as a second instance. BPF_LINK_DETACH (5.9)
	 * detaches now; if it fails the unlink still detaches, later. */
	for (int i = 0; i < 3; i++) {
		pin_path(p, sizeof(p), dir, progs[i].link_pin);
		int fd = bpf_obj_get(p);
		if (fd >= 0) {
			bpf_link_detach(fd);
			close(fd);
		}
		unlink(p);
	}
	for (int i = 0; i < 3; i++) {
		pin_path(p, sizeof(p), dir, progs[i].prog_pin);
		unlink(p);
	}
	for (int i = 0; i < 4; i++) {
		pin_path(p, sizeof(p), dir, map_pins[i]);
		unlink(p);
	}
}

static struct bpf_map *skel_map(struct smcr_opt *s, int i)
{
	struct bpf_map *m[4] = {s->maps.smcr_sk, s->maps.smcr_echo, s->maps.smcr_stats,
	                        s->maps.smcr_meta};
	return m[i];
}

static struct bpf_program *skel_prog(struct smcr_opt *s, int i)
{
	struct bpf_program *p[3] = {s->progs.smcr_sockops, s->progs.smcr_setsockopt,
	                            s->progs.smcr_getsockopt};
	return p[i];
}

static int write_meta(struct smcr_opt *s, const char *cgroup, __u64 cgid, __u64 when)
{
	struct smcr_bpf_meta m;
	__u32 k = 0;

	memset(&m, 0, sizeof(m));
	m.magic = SMCR_META_MAGIC;
	m.abi = SMCR_BPF_ABI;
	m.installed_at = when;
	m.cgroup_id = cgid;
	snprintf(m.version, sizeof(m.version), "%s", SMCR_VERSION);
	snprintf(m.cgroup, sizeof(m.cgroup), "%s", cgroup);
	return bpf_map_update_elem(bpf_map__fd(s->maps.smcr_meta), &k, &m, BPF_ANY);
}

static int read_meta(const char *dir, struct smcr_bpf_meta *m)
{
	char p[4096];
	__u32 k = 0;
	int fd, r;

	pin_path(p, sizeof(p), dir, "map_meta");
	fd = bpf_obj_get(p);
	if (fd < 0)
		return -errno;
	memset(m, 0, sizeof(*m));
	r = bpf_map_lookup_elem(fd, &k, m);
	close(fd);
	if (r)
		return -errno;
	return m->magic == SMCR_META_MAGIC ? 0 : -EPROTO;
}

static int cmd_install(const char *cgroup_arg, const char *dir)
{
	char cg[4096], where[4096], p[4096];
	struct smcr_opt *s = NULL;
	struct bpf_link *links[3] = {NULL, NULL, NULL};
	struct stat st;
	int cgfd = -1, rc = EXIT_ERR, pinned = 0;

	if (cgroup_arg) {
		snprintf(cg, sizeof(cg), "%s", cgroup_arg);
	} else if (find_cgroup2(cg, sizeof(cg)) != 0) {
		die_msg("no cgroup v2 hierarchy in /proc/mounts (mount -t cgroup2 none DIR)");
		return EXIT_ERR;
	}
	if (!fs_magic_is(cg, CGROUP2_MAGIC_)) {
		die_msg("%s is not a cgroup v2 directory", cg);
		return EXIT_ERR;
	}
	snprintf(p, sizeof(p), "%s", dir);
	{
		char *slash = strrchr(p, '/');
		if (slash && slash != p)
			*slash = 0;
		else if (slash)
			slash[1] = 0;
	}
	if (!fs_magic_is(p, BPF_FS_MAGIC_) && mount_bpffs(p) != 0)
		return EXIT_ERR;
	pin_path(p, sizeof(p), dir, "map_meta");
	if (path_exists(p)) {
		die_msg("already installed in %s (use `smcr-bpf upgrade` or `uninstall`)", dir);
		return EXIT_REFUSED;
	}
	/* One instance per host: a second one would reserve option space twice. */
	if (cgroup_has_smcr(cg, BPF_F_QUERY_EFFECTIVE)) {
		die_msg("an smcr instance already covers %s (installed on it or an ancestor)", cg);
		return EXIT_REFUSED;
	}
	if (subtree_has_smcr(cg, 0, where, sizeof(where))) {
		die_msg("an smcr instance is already attached below, to %s", where);
		return EXIT_REFUSED;
	}
	if (stat(cg, &st) != 0) {
		die_msg("stat %s: %s", cg, strerror(errno));
		return EXIT_ERR;
	}
	cgfd = open(cg, O_RDONLY | O_DIRECTORY);
	if (cgfd < 0) {
		die_msg("open %s: %s", cg, strerror(errno));
		return EXIT_ERR;
	}
	s = smcr_opt__open_and_load();
	if (!s) {
		die_msg("loading the BPF programs failed: %s (needs root, or CAP_BPF and "
		        "CAP_NET_ADMIN; kernel >= 5.15)",
		        strerror(errno));
		goto out;
	}
	if (write_meta(s, cg, (__u64)st.st_ino, (__u64)time(NULL)) != 0) {
		die_msg("writing install metadata: %s", strerror(errno));
		goto out;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		die_msg("mkdir %s: %s", dir, strerror(errno));
		goto out;
	}
	pinned = 1;
	for (int i = 0; i < 4; i++) {
		pin_path(p, sizeof(p), dir, map_pins[i]);
		if (bpf_map__pin(skel_map(s, i), p) != 0 || chmod_pin(dir, map_pins[i]) != 0) {
			die_msg("pinning %s failed", p);
			goto out;
		}
	}
	for (int i = 0; i < 3; i++) {
		pin_path(p, sizeof(p), dir, progs[i].prog_pin);
		if (bpf_program__pin(skel_prog(s, i), p) != 0 ||
		    chmod_pin(dir, progs[i].prog_pin) != 0) {
			die_msg("pinning %s failed", p);
			goto out;
		}
	}
	for (int i = 0; i < 3; i++) {
		links[i] = bpf_program__attach_cgroup(skel_prog(s, i), cgfd);
		if (!links[i]) {
			die_msg("attaching %s to %s failed: %s", progs[i].hook, cg,
			        strerror(errno));
			goto out;
		}
		pin_path(p, sizeof(p), dir, progs[i].link_pin);
		if (bpf_link__pin(links[i], p) != 0 || chmod_pin(dir, progs[i].link_pin) != 0) {
			die_msg("pinning %s failed", p);
			goto out;
		}
	}
	printf("smcr-bpf: installed version %s (abi %d) on cgroup %s, pinned in %s\n", SMCR_VERSION,
	       SMCR_BPF_ABI, cg, dir);
	rc = 0;
out:
	if (rc != 0 && pinned) {
		remove_pins(dir);
		rmdir(dir);
	}
	for (int i = 0; i < 3; i++)
		bpf_link__destroy(links[i]); /* pinned links stay attached */
	smcr_opt__destroy(s);
	if (cgfd >= 0)
		close(cgfd);
	return rc;
}

static int cmd_upgrade(const char *dir)
{
	struct smcr_bpf_meta m;
	struct smcr_opt *s = NULL;
	struct bpf_link *links[3] = {NULL, NULL, NULL};
	char p[4096];
	int mapfd[4] = {-1, -1, -1, -1}, rc = EXIT_ERR, r;

	r = read_meta(dir, &m);
	if (r) {
		die_msg("not installed in %s (%s)", dir, strerror(-r));
		return EXIT_NOT_INSTALLED;
	}
	s = smcr_opt__open();
	if (!s) {
		die_msg("opening the BPF object failed: %s", strerror(errno));
		return EXIT_ERR;
	}
	/* The new programs use the installed maps: sockets keep their state. */
	for (int i = 0; i < 4; i++) {
		pin_path(p, sizeof(p), dir, map_pins[i]);
		mapfd[i] = bpf_obj_get(p);
		if (mapfd[i] < 0 || bpf_map__reuse_fd(skel_map(s, i), mapfd[i]) != 0) {
			die_msg("map %s cannot be reused (%s): uninstall, then install", p,
			        strerror(errno));
			goto out;
		}
	}
	if (smcr_opt__load(s) != 0) {
		die_msg("loading the new programs failed: %s", strerror(errno));
		goto out;
	}
	/* Swap each link's program in place: no moment without the programs attached. */
	for (int i = 0; i < 3; i++) {
		pin_path(p, sizeof(p), dir, progs[i].link_pin);
		links[i] = bpf_link__open(p);
		if (!links[i]) {
			die_msg("opening link %s failed: %s", p, strerror(errno));
			goto out;
		}
		if (bpf_link__update_program(links[i], skel_prog(s, i)) != 0) {
			die_msg("replacing the %s program failed: %s", progs[i].hook,
			        strerror(errno));
			goto out;
		}
	}
	for (int i = 0; i < 3; i++) {
		pin_path(p, sizeof(p), dir, progs[i].prog_pin);
		unlink(p);
		if (bpf_program__pin(skel_prog(s, i), p) != 0 ||
		    chmod_pin(dir, progs[i].prog_pin) != 0) {
			die_msg("pinning %s failed", p);
			goto out;
		}
	}
	if (write_meta(s, m.cgroup, m.cgroup_id, (__u64)time(NULL)) != 0) {
		die_msg("writing install metadata: %s", strerror(errno));
		goto out;
	}
	printf("smcr-bpf: upgraded %s -> %s in %s (cgroup %s)\n", m.version, SMCR_VERSION, dir,
	       m.cgroup);
	rc = 0;
out:
	for (int i = 0; i < 3; i++)
		bpf_link__destroy(links[i]);
	smcr_opt__destroy(s);
	for (int i = 0; i < 4; i++)
		if (mapfd[i] >= 0)
			close(mapfd[i]);
	return rc;
}

static int cmd_uninstall(const char *dir)
{
	struct smcr_bpf_meta m;
	char p[4096];
	int any = 0;

	for (int i = 0; i < 3 && !any; i++) {
		pin_path(p, sizeof(p), dir, progs[i].link_pin);
		any = path_exists(p);
	}
	if (!any && read_meta(dir, &m) != 0) {
		die_msg("not installed in %s", dir);
		return EXIT_NOT_INSTALLED;
	}
	remove_pins(dir);
	if (rmdir(dir) != 0 && errno != ENOENT) {
		die_msg("rmdir %s: %s (files left there that smcr-bpf did not create?)", dir,
		        strerror(errno));
		return EXIT_ERR;
	}
	printf("smcr-bpf: uninstalled from %s\n", dir);
	return 0;
}

/* One line per program: ids, tag, and whether its link still attaches it. */
static void status_prog(const char *dir, int i, const char *cgroup)
{
	struct bpf_prog_info pi;
	struct bpf_link_info li;
	__u32 len, ids[64], cnt = 64, aflags = 0;
	char p[4096], tag[2 * BPF_TAG_SIZE + 1];
	int pfd, lfd, cgfd, attached = 0;

	memset(&pi, 0, sizeof(pi));
	memset(&li, 0, sizeof(li));
	pin_path(p, sizeof(p), dir, progs[i].link_pin);
	lfd = bpf_obj_get(p);
	len = sizeof(li);
	if (lfd >= 0 && bpf_obj_get_info_by_fd(lfd, &li, &len) != 0)
		li.id = 0;
	pfd = li.prog_id ? bpf_prog_get_fd_by_id(li.prog_id) : -1;
	len = sizeof(pi);
	if (pfd >= 0 && bpf_obj_get_info_by_fd(pfd, &pi, &len) != 0)
		pi.id = 0;
	for (int b = 0; b < BPF_TAG_SIZE; b++)
		snprintf(tag + 2 * b, 3, "%02x", pi.tag[b]);
	cgfd = open(cgroup, O_RDONLY | O_DIRECTORY);
	if (cgfd >= 0 && pi.id && bpf_prog_query(cgfd, progs[i].type, 0, &aflags, ids, &cnt) == 0)
		for (__u32 k = 0; k < cnt; k++)
			attached |= ids[k] == pi.id;
	printf("  %-12s prog %u %s tag %s, link %u, %s\n", progs[i].hook, pi.id,
	       pi.id ? pi.name : "?", pi.id ? tag : "?", li.id,
	       attached ? "attached" : "NOT ATTACHED");
	if (cgfd >= 0)
		close(cgfd);
	if (pfd >= 0)
		close(pfd);
	if (lfd >= 0)
		close(lfd);
}

static int cmd_status(const char *dir)
{
	struct smcr_bpf_meta m;
	char p[4096], when[64];
	int ncpu, fd, r;
	time_t t;
	struct tm tm;

	r = read_meta(dir, &m);
	if (r) {
		printf("smcr-bpf: not installed (no instance pinned in %s)\n", dir);
		return EXIT_NOT_INSTALLED;
	}
	m.version[sizeof(m.version) - 1] = 0;
	m.cgroup[sizeof(m.cgroup) - 1] = 0;
	t = (time_t)m.installed_at;
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	printf("smcr-bpf: installed\n");
	printf("  version      %s (abi %u)%s\n", m.version, m.abi,
	       strcmp(m.version, SMCR_VERSION) ? " (this smcr-bpf is " SMCR_VERSION
	                                         ": `smcr-bpf upgrade`)"
	                                       : "");
	printf("  pin dir      %s\n", dir);
	printf("  cgroup       %s (id %llu)\n", m.cgroup, (unsigned long long)m.cgroup_id);
	printf("  installed    %s\n", when);
	for (int i = 0; i < 3; i++)
		status_prog(dir, i, m.cgroup);
	pin_path(p, sizeof(p), dir, "map_stats");
	fd = bpf_obj_get(p);
	ncpu = libbpf_num_possible_cpus();
	if (fd < 0 || ncpu <= 0) {
		die_msg("counters unreadable: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_ERR;
	}
	__u64 *vals = calloc((size_t)ncpu, sizeof(__u64));
	if (!vals) {
		close(fd);
		return EXIT_ERR;
	}
	printf("counters\n");
	for (__u32 k = 0; k < SMCR_C__COUNT; k++) {
		unsigned long long sum = 0;
		if (bpf_map_lookup_elem(fd, &k, vals) == 0)
			for (int c = 0; c < ncpu; c++)
				sum += vals[c];
		printf("  %-30s %llu\n", ctr_names[k], sum);
	}
	free(vals);
	close(fd);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: smcr-bpf install   [--cgroup PATH] [--pin-dir DIR]\n"
	           "       smcr-bpf upgrade   [--pin-dir DIR]\n"
	           "       smcr-bpf uninstall [--pin-dir DIR]\n"
	           "       smcr-bpf status    [--pin-dir DIR]\n"
	           "Installs the BPF programs that let unprivileged smcr programs offer SMC-R in\n"
	           "their TCP handshakes (kind 254, ExID E2D4C3D9). Default cgroup: the cgroup v2\n"
	           "root from /proc/mounts; default pin dir: " DEFAULT_PIN_DIR ".\n"
	           "Options: -v (libbpf messages), --version.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"cgroup", required_argument, NULL, 'c'}, {"pin-dir", required_argument, NULL, 'p'},
	    {"verbose", no_argument, NULL, 'v'},      {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
	};
	const char *cgroup = NULL, *dir = DEFAULT_PIN_DIR, *cmd;
	int c;

	while ((c = getopt_long(argc, argv, "c:p:vVh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			cgroup = optarg;
			break;
		case 'p':
			dir = optarg;
			break;
		case 'v':
			verbose++;
			break;
		case 'V':
			printf("smcr-bpf %s (abi %d)\n", SMCR_VERSION, SMCR_BPF_ABI);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[optind];
	libbpf_set_print(libbpf_print);
	if (strcmp(cmd, "install") == 0)
		return cmd_install(cgroup, dir);
	if (cgroup) {
		die_msg("--cgroup only applies to install (the installed cgroup is recorded)");
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "upgrade") == 0)
		return cmd_upgrade(dir);
	if (strcmp(cmd, "uninstall") == 0)
		return cmd_uninstall(dir);
	if (strcmp(cmd, "status") == 0)
		return cmd_status(dir);
	usage(stderr);
	return EXIT_USAGE;
}
