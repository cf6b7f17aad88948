/*
 * loom fsck: Loom's LFSCK, offline (as e2fsck): checks the namespace in the MDT against the
 * objects on the OSTs and, with --repair, mends it.
 *
 *   loom fsck --dir DIR [--repair]                          a `loom cluster` directory
 *   loom fsck --mdt PATH --ost PATH [--ost PATH...] [--repair]
 *
 * The MDT's half (namespace, layouts, which objects a layout needs) is src/mdt/fsck*.c (fsck.h;
 * fsck.c says which file holds which pass); this file finds the targets, makes sure no server
 * has them, gives the MDT half its view of the objects, and walks every OST for objects nothing
 * references (orphans).
 *
 * Output: one line per problem on stdout ("KIND: [PATH (ino N): ]WHAT[; repaired: FIX]"), a line
 * of totals, then "N problems found, M repaired". Warnings and errors go to stderr.
 * Exit status: 0 the file system is consistent (clean, or everything found was repaired);
 * 1 problems remain; 4 an operational error (fsck could not check); 16 a usage error.
 *
 * Repairs on an OST: a missing object is created empty (holes read as zeros) and tagged; an orphan
 * object (with its ".crc" checksum sidecar) is moved to OST_DIR/lost+found/, where nothing reads
 * it: fsck never deletes data (remove that directory to reclaim the space).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/util.h"
#include "mdt/fsck.h"
#include "mdt/store.h"
#include "tools/tool.h"

#define EXIT_CLEAN   0
#define EXIT_PROBLEM 1
#define EXIT_OPER    4
#define EXIT_USAGE   16

#define NOFIX_TOOL 1 /* not repaired: no --repair */

#define MAX_OSTS   1024
#define FID_XATTR  "user.loom.fid"
#define CRC_SUFFIX ".crc"
#define OST_LOST   "lost+found"

struct fsck_ost {
	char dir[PATH_MAX];     /* real path */
	char uuid[40];
	char fsname[16];
	uint32_t idx;
	bool has_idx;
	bool skip;              /* not this file system's: not walked */
	int fd_odir[256];       /* O/xx, -1 if missing */
};

struct fsck {
	bool repair;
	char mdt[PATH_MAX];
	struct fsck_ost *osts;
	size_t nosts;
	struct mdt_fsck *f;
	uint32_t warned_idx[64];
	size_t nwarned;
};

static int usage(FILE *out, int rc)
{
	fprintf(out,
		"usage: loom fsck --dir DIR [--repair]\n"
		"       loom fsck --mdt PATH --ost PATH [--ost PATH...] [--repair]\n"
		"Checks a stopped file system: the namespace in the MDT against the objects on the OSTs.\n"
		"  --dir DIR   a `loom cluster` directory (MDT in DIR/mdt, OSTs in DIR/ost*)\n"
		"  --mdt PATH  the MDT directory; --ost PATH for each OST directory\n"
		"  --repair    repair what is found (without it nothing is changed)\n"
		"The MDS and every OSS must be stopped. Exit status: 0 consistent (clean, or all\n"
		"repaired), 1 problems remain, 4 operational error, 16 usage error.\n");
	return rc;
}

/* Prints a string from the file system with control characters made visible. */
static void put_clean(const char *s)
{
	for (; *s; s++)
		putchar(iscntrl((unsigned char)*s) ? '?' : *s);
}

static void print_problem(void *arg, const struct mdt_fsck_problem *p)
{
	(void)arg;
	printf("%s: ", mdt_fsck_kind_name(p->kind));
	if (p->path) {
		put_clean(p->path);
		printf(" (ino %" PRIu64 "): ", p->ino);
	} else if (p->ino) {
		printf("ino %" PRIu64 ": ", p->ino);
	}
	put_clean(p->what);
	if (p->fix) {
		printf("; repaired: ");
		put_clean(p->fix);
	}
	putchar('\n');
	fflush(stdout);
}

/* A problem this file found itself (on an OST). */
static void ost_problem(struct fsck *c, const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void ost_problem(struct fsck *c, const char *fix, const char *fmt, ...)
{
	struct mdt_fsck_problem p = { .kind = MDT_FSCK_OST };
	char what[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	p.what = what;
	p.fix = fix;
	print_problem(NULL, &p);
	mdt_fsck_count(c->f, fix != NULL);
}

/* ---- finding the targets ---- */

static int ost_conf(struct fsck_ost *o)
{
	char path[PATH_MAX + 16], *buf, *line, *save = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/ost.conf", o->dir);
	rc = file_read_all(path, &buf, NULL);
	if (rc)
		return rc;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq++ = '\0';
		if (!strcmp(line, "fsname"))
			snprintf(o->fsname, sizeof(o->fsname), "%s", eq);
		else if (!strcmp(line, "uuid"))
			snprintf(o->uuid, sizeof(o->uuid), "%s", eq);
		else if (!strcmp(line, "index")) {
			char *end;
			unsigned long v = strtoul(eq, &end, 10);
			if (*eq && !*end && v <= UINT32_MAX) {
				o->idx = (uint32_t)v;
				o->has_idx = true;
			}
		}
	}
	free(buf);
	return o->uuid[0] && o->fsname[0] ? 0 : -EINVAL;
}

static int add_ost(struct fsck *c, const char *dir)
{
	struct fsck_ost *o;
	int rc;

	if (c->nosts == MAX_OSTS) {
		fprintf(stderr, "loom fsck: at most %d OSTs\n", MAX_OSTS);
		return -E2BIG;
	}
	o = &c->osts[c->nosts];
	memset(o, 0, sizeof(*o));
	for (int i = 0; i < 256; i++)
		o->fd_odir[i] = -1;
	if (!realpath(dir, o->dir)) {
		rc = -errno;
		fprintf(stderr, "loom fsck: %s: %s\n", dir, strerror(-rc));
		return rc;
	}
	rc = ost_conf(o);
	if (rc) {
		fprintf(stderr, "loom fsck: %s is not an OST (no readable ost.conf with fsname and "
				"uuid): %s\n", o->dir, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < c->nosts; i++) {
		if (!strcmp(c->osts[i].dir, o->dir) || !strcmp(c->osts[i].uuid, o->uuid)) {
			fprintf(stderr, "loom fsck: %s given twice (or two OSTs with uuid %s)\n", o->dir,
				o->uuid);
			return -EINVAL;
		}
	}
	c->nosts++;
	return 0;
}

static int ost_name_cmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a + 3, *y = *(const char *const *)b + 3;

	return atoi(x) - atoi(y);
}

/* DIR/ost<N> with an ost.conf, in order of N. */
static int find_cluster_osts(struct fsck *c, const char *dir)
{
	char *names[MAX_OSTS], path[PATH_MAX + 300];
	size_t n = 0;
	struct dirent *de;
	DIR *d = opendir(dir);
	int rc = 0;

	if (!d) {
		rc = -errno;
		fprintf(stderr, "loom fsck: %s: %s\n", dir, strerror(-rc));
		return rc;
	}
	while ((de = readdir(d)) && n < MAX_OSTS) {
		struct stat st;
		const char *p = de->d_name + 3;
		if (strncmp(de->d_name, "ost", 3) || !*p || strspn(p, "0123456789") != strlen(p))
			continue;
		snprintf(path, sizeof(path), "%s/%s/ost.conf", dir, de->d_name);
		if (stat(path, &st) == 0 && (names[n] = strdup(de->d_name)))
			n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), ost_name_cmp);
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (rc == 0)
			rc = add_ost(c, path);
		free(names[i]);
	}
	return rc;
}

/* The pid of a running loom-oss serving the OST directory `dir` (a real path), or 0. Looks at
 * every process's command line: the OSS takes no lock on its OST that fsck could try. */
static pid_t oss_serving(const char *dir)
{
	DIR *proc = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	if (!proc)
		return 0;
	while (!found && (de = readdir(proc))) {
		char path[300], cmd[16384], cwd[PATH_MAX + 300], real[PATH_MAX], *arg, *argv0;
		bool format = false, next_is_ost = false;
		ssize_t n;
		int fd;

		if (strspn(de->d_name, "0123456789") != strlen(de->d_name))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, cmd, sizeof(cmd) - 1);
		close(fd);
		if (n <= 0)
			continue;
		cmd[n] = '\0';
		argv0 = strrchr(cmd, '/') ? strrchr(cmd, '/') + 1 : cmd;
		if (strncmp(argv0, "loom-oss", 8) != 0)
			continue;
		for (arg = cmd + strlen(cmd) + 1; arg < cmd + n; arg += strlen(arg) + 1)
			format |= !strcmp(arg, "--format");
		if (format)
			continue; /* formatting, not serving */
		for (arg = cmd + strlen(cmd) + 1; arg < cmd + n && !found; arg += strlen(arg) + 1) {
			const char *ost = NULL;
			if (next_is_ost)
				ost = arg;
			else if (!strncmp(arg, "--ost=", 6))
				ost = arg + 6;
			next_is_ost = !strcmp(arg, "--ost");
			if (!ost)
				continue;
			if (ost[0] == '/')
				snprintf(cwd, sizeof(cwd), "%s", ost);
			else
				snprintf(cwd, sizeof(cwd), "/proc/%s/cwd/%s", de->d_name, ost);
			if (realpath(cwd, real) && !strcmp(real, dir))
				found = (pid_t)atoi(de->d_name);
		}
	}
	closedir(proc);
	return found;
}

/* ---- objects on the OSTs ---- */

static struct fsck_ost *ost_by_idx(struct fsck *c, uint32_t idx)
{
	for (size_t i = 0; i < c->nosts; i++)
		if (!c->osts[i].skip && c->osts[i].has_idx && c->osts[i].idx == idx)
			return &c->osts[i];
	return NULL;
}

static void obj_name(uint64_t objid, char *buf, size_t cap)
{
	snprintf(buf, cap, "%" PRIx64, objid);
}

/* The O/xx directory of an object, opened on first use; -1 if it is missing. */
static int odir(struct fsck_ost *o, unsigned d)
{
	char path[PATH_MAX + 16];

	if (o->fd_odir[d] < 0) {
		snprintf(path, sizeof(path), "%s/O/%02x", o->dir, d);
		o->fd_odir[d] = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	return o->fd_odir[d];
}

static bool parse_tag(const char *buf, ssize_t n, uint64_t *ino, uint32_t *stripe)
{
	char tag[64];
	unsigned long long i;
	unsigned s;
	char extra;

	if (n <= 0 || (size_t)n >= sizeof(tag))
		return false;
	memcpy(tag, buf, (size_t)n);
	tag[n] = '\0';
	if (sscanf(tag, "%llu:%u%c", &i, &s, &extra) != 2)
		return false;
	*ino = i;
	*stripe = s;
	return true;
}

/* Reads an object's user.loom.fid tag (fd of the object). */
static bool read_tag(int fd, uint64_t *ino, uint32_t *stripe)
{
	char buf[64];

	return parse_tag(buf, fgetxattr(fd, FID_XATTR, buf, sizeof(buf)), ino, stripe);
}

static int obj_stat(void *arg, uint32_t ost, uint64_t objid, struct mdt_fsck_obj *out)
{
	struct fsck *c = arg;
	struct fsck_ost *o = ost_by_idx(c, ost);
	char name[32];
	struct stat st;
	int d, fd;

	memset(out, 0, sizeof(*out));
	if (!o) {
		bool told = false;
		for (size_t i = 0; i < c->nwarned; i++)
			told |= c->warned_idx[i] == ost;
		if (!told && c->nwarned < sizeof(c->warned_idx) / sizeof(c->warned_idx[0])) {
			c->warned_idx[c->nwarned++] = ost;
			fprintf(stderr, "loom fsck: warning: OST %u was not given: its objects are not "
					"checked\n", ost);
		}
		return -ENODEV;
	}
	d = odir(o, (unsigned)(objid & 0xff));
	if (d < 0)
		return 0; /* the directory is missing (reported by the OST walk): so is the object */
	obj_name(objid, name, sizeof(name));
	fd = openat(d, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT || errno == ELOOP ? 0 : -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0; /* not an object: as if missing */
	}
	out->exists = true;
	out->size = (uint64_t)st.st_size;
	out->blocks = (uint64_t)st.st_blocks;
	out->mtime = st.st_mtim;
	out->tagged = read_tag(fd, &out->tag_ino, &out->tag_stripe);
	close(fd);
	return 0;
}

/* Creates a missing object empty, or retags one, durably. */
static int obj_fix(void *arg, uint32_t ost, uint64_t objid, uint64_t ino, uint32_t stripe)
{
	struct fsck *c = arg;
	struct fsck_ost *o = ost_by_idx(c, ost);
	char name[48], tag[64];
	struct stat dst;
	int d, fd, n, rc = 0;
	bool created = false;

	if (!o)
		return -ENODEV;
	d = odir(o, (unsigned)(objid & 0xff));
	if (d < 0)
		return -ENOENT;
	obj_name(objid, name, sizeof(name));
	fd = openat(d, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		char crc[64];
		/* A checksum sidecar left without its object would describe data the new, empty
		 * object does not have: the OSS would call its blocks bad. */
		snprintf(crc, sizeof(crc), "%s%s", name, CRC_SUFFIX);
		if (unlinkat(d, crc, 0) < 0 && errno != ENOENT)
			return -errno;
		fd = openat(d, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		created = fd >= 0;
	}
	if (fd < 0)
		return -errno;
	/* The OSS may run as another user than fsck: give the object the directory's owner. */
	if (created && fstat(d, &dst) == 0 && geteuid() == 0 && fchown(fd, dst.st_uid, dst.st_gid) < 0)
		rc = -errno;
	n = snprintf(tag, sizeof(tag), "%" PRIu64 ":%u", ino, stripe);
	if (rc == 0 && fsetxattr(fd, FID_XATTR, tag, (size_t)n, 0) < 0 && errno != ENOTSUP)
		rc = -errno;
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc == 0 && created && fsync(d) < 0)
		rc = -errno;
	return rc;
}

/* Moves an orphan (and its checksum sidecar) to OST_DIR/lost+found; *dest gets where. */
static int move_orphan(struct fsck_ost *o, int d, const char *name, char *dest, size_t cap)
{
	char lf[PATH_MAX + 16], target[64], from_crc[300], to_crc[80];
	int lfd, rc = 0;

	snprintf(lf, sizeof(lf), "%s/%s", o->dir, OST_LOST);
	if (mkdir(lf, 0700) < 0 && errno != EEXIST)
		return -errno;
	lfd = open(lf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lfd < 0)
		return -errno;
	/* Object ids are never reused, but a name moved here before may be back (a stale OST). */
	snprintf(target, sizeof(target), "%s", name);
	for (int i = 1; faccessat(lfd, target, F_OK, AT_SYMLINK_NOFOLLOW) == 0; i++)
		snprintf(target, sizeof(target), "%.40s.%d", name, i);
	if (renameat(d, name, lfd, target) < 0) {
		rc = -errno;
		goto out;
	}
	snprintf(from_crc, sizeof(from_crc), "%s%s", name, CRC_SUFFIX);
	snprintf(to_crc, sizeof(to_crc), "%s%s", target, CRC_SUFFIX);
	if (renameat(d, from_crc, lfd, to_crc) < 0 && errno != ENOENT)
		rc = -errno;
	if (rc == 0 && (fsync(lfd) < 0 || fsync(d) < 0))
		rc = -errno;
	snprintf(dest, cap, "%s/%s", OST_LOST, target);
out:
	close(lfd);
	return rc;
}

static bool is_hex(const char *s)
{
	return *s && strspn(s, "0123456789abcdefABCDEF") == strlen(s);
}

/* One object file found on an OST. */
static int check_found(struct fsck *c, struct fsck_ost *o, unsigned dnum, int d, const char *name)
{
	char canon[32], dest[128], tagtxt[80] = "", fix[200], extra[160] = "";
	uint64_t objid = 0, tino = 0, next;
	uint32_t tstripe = 0;
	bool misplaced;
	struct stat st;
	int fd, rc;

	if (fstatat(d, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	if (strlen(name) <= 16)
		objid = strtoull(name, NULL, 16);
	obj_name(objid, canon, sizeof(canon));
	/* The OSS looks for an object only under its canonical name in its own directory. */
	misplaced = strlen(name) > 16 || strcmp(canon, name) != 0 || (objid & 0xff) != dnum;
	if (!misplaced && mdt_fsck_object(c->f, o->idx, objid, NULL, NULL) != MDT_FSCK_OBJ_UNKNOWN)
		return 0;

	fd = openat(d, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		if (read_tag(fd, &tino, &tstripe))
			snprintf(tagtxt, sizeof(tagtxt), ", tagged as %" PRIu64 ":%u", tino, tstripe);
		close(fd);
	}
	next = mdt_fsck_next_objid(c->f, o->idx);
	if (!misplaced && next && objid >= next)
		snprintf(extra, sizeof(extra), "; its id is not below the OST's next object id %#"
			 PRIx64 ": a new file would have found its data", next);
	rc = NOFIX_TOOL;
	if (c->repair) {
		rc = move_orphan(o, d, name, dest, sizeof(dest));
		snprintf(fix, sizeof(fix), "moved to %s/%s", o->dir, dest);
	}
	if (rc < 0)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), " (repair failed: %s)",
			 strerror(-rc));
	if (misplaced) {
		struct mdt_fsck_problem p = { .kind = MDT_FSCK_ORPHAN_OBJECT };
		char what[600];
		snprintf(what, sizeof(what), "OST %u: file O/%02x/%s (%lld bytes%s) is not where the "
			 "OSS looks for any object%s", o->idx, dnum, name, (long long)st.st_size,
			 tagtxt, extra);
		p.what = what;
		p.fix = rc == 0 ? fix : NULL;
		print_problem(NULL, &p);
	} else {
		struct mdt_fsck_problem p = { .kind = MDT_FSCK_ORPHAN_OBJECT };
		char what[600];
		snprintf(what, sizeof(what), "OST %u object %#" PRIx64 " (%lld bytes%s): no layout "
			 "references it%s", o->idx, objid, (long long)st.st_size, tagtxt, extra);
		p.what = what;
		p.fix = rc == 0 ? fix : NULL;
		print_problem(NULL, &p);
	}
	mdt_fsck_count(c->f, rc == 0);
	return 0;
}

/* The 256 object directories O/xx of an OST, before anything looks for objects in them. */
static void check_odirs(struct fsck *c, struct fsck_ost *o)
{
	for (unsigned dn = 0; dn < 256; dn++) {
		char path[PATH_MAX + 16];
		int rc = NOFIX_TOOL;

		if (odir(o, dn) >= 0)
			continue;
		snprintf(path, sizeof(path), "%s/O/%02x", o->dir, dn);
		if (errno != ENOENT) {
			fprintf(stderr, "loom fsck: warning: %s: %s\n", path, strerror(errno));
			continue;
		}
		if (c->repair)
			rc = mkdir_p(path, 0755);
		ost_problem(c, rc == 0 ? "made" : NULL,
			    "OST %u: directory %s is missing (the OSS does not start without it)%s%s%s",
			    o->idx, path, rc < 0 ? " (repair failed: " : "", rc < 0 ? strerror(-rc) : "",
			    rc < 0 ? ")" : "");
	}
}

/* Walks O/00..O/ff of an OST for objects no layout references. */
static int walk_ost(struct fsck *c, struct fsck_ost *o)
{
	int rc = 0;

	for (unsigned dn = 0; dn < 256 && rc == 0; dn++) {
		struct dirent *de;
		DIR *dir;
		int d = odir(o, dn), dd;

		if (d < 0)
			continue; /* reported by check_odirs */
		/* A descriptor of its own: readdir's position must not move the one kept for I/O. */
		dd = openat(d, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		dir = dd >= 0 ? fdopendir(dd) : NULL;
		if (!dir) {
			rc = -errno;
			if (dd >= 0)
				close(dd);
			fprintf(stderr, "loom fsck: %s/O/%02x: %s\n", o->dir, dn, strerror(-rc));
			break;
		}
		while ((de = readdir(dir)) != NULL && rc == 0) {
			/* Objects have hex names; anything else (".crc" checksum sidecars, temporary
			 * files) belongs to the OSS and is left alone. */
			if (!is_hex(de->d_name))
				continue;
			rc = check_found(c, o, dn, d, de->d_name);
		}
		closedir(dir);
		if (rc)
			fprintf(stderr, "loom fsck: %s/O/%02x: %s\n", o->dir, dn, strerror(-rc));
	}
	return rc;
}

/* ---- the command ---- */

/* Matches each OST directory with the MDT's table (by uuid): refuses a directory that claims an
 * index the MDT gave another OST, and skips one the MDT does not know. */
static int match_osts(struct fsck *c, struct mdt_store *s)
{
	const struct mdt_ost *tab;
	uint32_t n, gen;

	tab = mdt_ost_table(s, &n, &gen);
	for (size_t i = 0; i < c->nosts; i++) {
		struct fsck_ost *o = &c->osts[i];
		const struct mdt_ost *by_uuid = NULL, *by_idx = NULL;

		if (strcmp(o->fsname, mdt_store_fsname(s)) != 0) {
			fprintf(stderr, "loom fsck: %s belongs to file system '%s', the MDT to '%s'\n",
				o->dir, o->fsname, mdt_store_fsname(s));
			return -EINVAL;
		}
		for (uint32_t k = 0; k < n; k++) {
			if (!strcmp(tab[k].uuid, o->uuid))
				by_uuid = &tab[k];
			if (o->has_idx && tab[k].idx == o->idx)
				by_idx = &tab[k];
		}
		if (by_uuid && o->has_idx && by_uuid->idx != o->idx) {
			fprintf(stderr, "loom fsck: %s says index %u, the MDT has its uuid %s as OST %u\n",
				o->dir, o->idx, o->uuid, by_uuid->idx);
			return -EINVAL;
		}
		if (!by_uuid && by_idx) {
			fprintf(stderr, "loom fsck: %s (uuid %s) says index %u, which the MDT gave to "
					"uuid %s: not this file system's OST, or a replaced one\n",
				o->dir, o->uuid, o->idx, by_idx->uuid);
			return -EINVAL;
		}
		if (!by_uuid) {
			fprintf(stderr, "loom fsck: warning: %s never registered with this MDT: not "
					"checked\n", o->dir);
			o->skip = true;
			continue;
		}
		o->idx = by_uuid->idx;
		o->has_idx = true;
		for (size_t j = 0; j < i; j++) {
			if (!c->osts[j].skip && c->osts[j].idx == o->idx) {
				fprintf(stderr, "loom fsck: %s and %s are both OST %u\n", c->osts[j].dir,
					o->dir, o->idx);
				return -EINVAL;
			}
		}
	}
	for (uint32_t k = 0; k < n; k++)
		if (!ost_by_idx(c, tab[k].idx))
			fprintf(stderr, "loom fsck: warning: OST %u (uuid %s) of the MDT was not given: "
					"its objects are not checked\n", tab[k].idx, tab[k].uuid);
	return 0;
}

static int run(struct fsck *c)
{
	struct mdt_fsck_ops ops = { .report = print_problem, .obj_stat = obj_stat,
				    .obj_fix = obj_fix, .arg = c };
	const struct mdt_fsck_stats *st;
	struct mdt_store *s = NULL;
	struct mdt_txn *t = NULL;
	size_t walked = 0;
	int rc;

	for (size_t i = 0; i < c->nosts; i++) {
		pid_t pid = oss_serving(c->osts[i].dir);
		if (pid) {
			fprintf(stderr, "loom fsck: %s is served by loom-oss (pid %d): stop every OSS "
					"and the MDS first (loom cluster down)\n", c->osts[i].dir, (int)pid);
			return EXIT_OPER;
		}
	}
	rc = mdt_store_open(c->mdt, &s);
	if (rc) {
		if (rc == -EBUSY)
			fprintf(stderr, "loom fsck: the MDT at %s is in use (a running loom-mds holds it): "
					"stop the MDS and every OSS first (loom cluster down)\n", c->mdt);
		else if (rc == -ENOENT)
			fprintf(stderr, "loom fsck: %s holds no MDT\n", c->mdt);
		else
			fprintf(stderr, "loom fsck: cannot open the MDT at %s: %s\n", c->mdt,
				strerror(-rc));
		return EXIT_OPER;
	}
	rc = match_osts(c, s);
	if (rc)
		goto fail;
	/* Without --repair only a read transaction is ever begun: nothing is written. */
	rc = mdt_txn_begin(s, c->repair, &t);
	if (rc == 0)
		rc = mdt_fsck_new(t, c->repair, &ops, &c->f);
	for (size_t i = 0; rc == 0 && i < c->nosts; i++)
		if (!c->osts[i].skip)
			check_odirs(c, &c->osts[i]);
	if (rc == 0)
		rc = mdt_fsck_namespace(c->f);
	if (rc == 0)
		rc = mdt_fsck_layouts(c->f);
	if (rc) {
		mdt_txn_abort(t);
		fprintf(stderr, "loom fsck: checking the MDT failed: %s%s\n",
			rc == MDT_ETXNFULL ? "too many repairs for one transaction" : strerror(-rc),
			c->repair ? " (the MDT was not changed)" : "");
		goto fail;
	}
	/* Committed before any orphan moves: an object leaves O/ only once no layout can name it. */
	rc = mdt_txn_commit(t);
	if (rc) {
		fprintf(stderr, "loom fsck: writing the MDT's repairs failed: %s\n", strerror(-rc));
		goto fail;
	}
	for (size_t i = 0; i < c->nosts; i++) {
		if (c->osts[i].skip)
			continue;
		rc = walk_ost(c, &c->osts[i]);
		if (rc)
			goto fail;
		walked++;
	}
	st = mdt_fsck_stats(c->f);
	printf("%" PRIu64 " inodes (%" PRIu64 " directories, %" PRIu64 " files), %" PRIu64
	       " entries, %" PRIu64 " objects on %zu OSTs checked%s\n", st->inodes, st->dirs,
	       st->files, st->entries, st->objects, walked,
	       st->unchecked ? " (some on OSTs not given were not)" : "");
	printf("%" PRIu64 " problems found, %" PRIu64 " repaired\n", st->problems, st->repaired);
	mdt_store_close(s);
	return st->repaired < st->problems ? EXIT_PROBLEM : EXIT_CLEAN;
fail:
	if (c->f) {
		st = mdt_fsck_stats(c->f);
		printf("%" PRIu64 " problems found, %" PRIu64 " repaired (fsck did not finish)\n",
		       st->problems, st->repaired);
	}
	mdt_store_close(s);
	return EXIT_OPER;
}

int cmd_fsck(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' }, { "mdt", required_argument, NULL, 'm' },
		{ "ost", required_argument, NULL, 'o' }, { "repair", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },      { NULL, 0, NULL, 0 },
	};
	struct fsck c = { 0 };
	const char *dir = NULL, *mdt = NULL;
	const char *ost_args[MAX_OSTS];
	size_t nost_args = 0;
	int ch, rc;

	(void)ctx;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case 'd': dir = optarg; break;
		case 'm': mdt = optarg; break;
		case 'o':
			if (nost_args == MAX_OSTS)
				return usage(stderr, EXIT_USAGE);
			ost_args[nost_args++] = optarg;
			break;
		case 'r': c.repair = true; break;
		case 'h': return usage(stdout, EXIT_CLEAN);
		default: return usage(stderr, EXIT_USAGE);
		}
	}
	if (optind != argc || (dir && (mdt || nost_args)) || (!dir && (!mdt || !nost_args)))
		return usage(stderr, EXIT_USAGE);
	c.osts = calloc(MAX_OSTS, sizeof(*c.osts));
	if (!c.osts) {
		tool_fail("fsck", "memory", -ENOMEM);
		return EXIT_OPER;
	}
	if (dir) {
		snprintf(c.mdt, sizeof(c.mdt), "%s/mdt", dir);
		rc = find_cluster_osts(&c, dir);
		if (rc == 0 && c.nosts == 0) {
			fprintf(stderr, "loom fsck: %s holds no OST (ost*/ost.conf)\n", dir);
			rc = -ENOENT;
		}
	} else {
		snprintf(c.mdt, sizeof(c.mdt), "%s", mdt);
		rc = 0;
		for (size_t i = 0; rc == 0 && i < nost_args; i++)
			rc = add_ost(&c, ost_args[i]);
	}
	rc = rc ? EXIT_OPER : run(&c);
	for (size_t i = 0; i < c.nosts; i++)
		for (int d = 0; d < 256; d++)
			if (c.osts[i].fd_odir[d] >= 0)
				close(c.osts[i].fd_odir[d]);
	mdt_fsck_free(c.f);
	free(c.osts);
	return rc;
}
