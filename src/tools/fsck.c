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
#include "oss/ost_format.h"
#include "tools/tool.h"

#define EXIT_CLEAN   0
#define EXIT_PROBLEM 1
#define EXIT_OPER    4
#define EXIT_USAGE   16

#define NOFIX_TOOL 1 /* not repaired: no --repair */

#define MAX_OSTS   1024

struct fsck_ost {
	char dir[PATH_MAX];     /* real path */
	struct ost_conf conf;   /* its idx: the MDT's for it once matched (match_osts) */
	bool skip;              /* not this file system's: not walked */
	int fd_odir[OST_NDIRS]; /* O/xx, -1 if missing */
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

static int add_ost(struct fsck *c, const char *dir)
{
	struct fsck_ost *o;
	char why[128];
	int rc;

	if (c->nosts == MAX_OSTS) {
		fprintf(stderr, "loom fsck: at most %d OSTs\n", MAX_OSTS);
		return -E2BIG;
	}
	o = &c->osts[c->nosts];
	memset(o, 0, sizeof(*o));
	for (int i = 0; i < OST_NDIRS; i++)
		o->fd_odir[i] = -1;
	if (!realpath(dir, o->dir)) {
		rc = -errno;
		fprintf(stderr, "loom fsck: %s: %s\n", dir, strerror(-rc));
		return rc;
	}
	rc = ost_conf_read(o->dir, &o->conf, why, sizeof(why));
	if (rc) {
		fprintf(stderr, "loom fsck: %s is not an OST (no readable " OST_CONF_FILE " with fsname "
				"and uuid): %s\n", o->dir, why);
		return rc;
	}
	for (size_t i = 0; i < c->nosts; i++) {
		if (!strcmp(c->osts[i].dir, o->dir) || !strcmp(c->osts[i].conf.uuid, o->conf.uuid)) {
			fprintf(stderr, "loom fsck: %s given twice (or two OSTs with uuid %s)\n", o->dir,
				o->conf.uuid);
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
		snprintf(path, sizeof(path), "%s/%s/" OST_CONF_FILE, dir, de->d_name);
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
		if (!c->osts[i].skip && c->osts[i].conf.idx != OST_IDX_NONE &&
		    c->osts[i].conf.idx == idx)
			return &c->osts[i];
	return NULL;
}

/* The O/xx directory of an object, opened on first use; -1 if it is missing. */
static int odir(struct fsck_ost *o, unsigned d)
{
	char path[PATH_MAX + 16];

	if (o->fd_odir[d] < 0) {
		snprintf(path, sizeof(path), "%s/" OST_ODIR_FMT, o->dir, d);
		o->fd_odir[d] = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	return o->fd_odir[d];
}

/* Reads an object's user.loom.fid tag (fd of the object). */
static bool read_tag(int fd, uint64_t *ino, uint32_t *stripe)
{
	char buf[OST_FID_TAG_MAX];
	ssize_t n = fgetxattr(fd, OST_FID_XATTR, buf, sizeof(buf));

	return n > 0 && ost_fid_parse(buf, (size_t)n, ino, stripe) == 0;
}

static int obj_stat(void *arg, uint32_t ost, uint64_t objid, struct mdt_fsck_obj *out)
{
	struct fsck *c = arg;
	struct fsck_ost *o = ost_by_idx(c, ost);
	char name[OST_OBJ_NAME_MAX];
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
	d = odir(o, ost_obj_dir(objid));
	if (d < 0)
		return 0; /* the directory is missing (reported by the OST walk): so is the object */
	ost_obj_name(objid, name, sizeof(name));
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
	char name[OST_OBJ_NAME_MAX], tag[OST_FID_TAG_MAX];
	struct stat dst;
	size_t n;
	int d, fd, rc = 0;
	bool created = false;

	if (!o)
		return -ENODEV;
	d = odir(o, ost_obj_dir(objid));
	if (d < 0)
		return -ENOENT;
	ost_obj_name(objid, name, sizeof(name));
	fd = openat(d, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		char crc[OST_OBJ_NAME_MAX];
		/* A checksum sidecar left without its object would describe data the new, empty
		 * object does not have: the OSS would call its blocks bad. */
		ost_csum_name(objid, crc, sizeof(crc));
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
	n = ost_fid_format(ino, stripe, tag);
	if (rc == 0 && fsetxattr(fd, OST_FID_XATTR, tag, n, 0) < 0 && errno != ENOTSUP)
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

	snprintf(lf, sizeof(lf), "%s/" OST_LOST_FOUND, o->dir);
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
	snprintf(from_crc, sizeof(from_crc), "%s" OST_CSUM_SUFFIX, name);
	snprintf(to_crc, sizeof(to_crc), "%s" OST_CSUM_SUFFIX, target);
	if (renameat(d, from_crc, lfd, to_crc) < 0 && errno != ENOENT)
		rc = -errno;
	if (rc == 0 && (fsync(lfd) < 0 || fsync(d) < 0))
		rc = -errno;
	snprintf(dest, cap, OST_LOST_FOUND "/%s", target);
out:
	close(lfd);
	return rc;
}

/* One object file found on an OST, named as object objid (kind OST_NAME_OBJECT) or as none the
 * OSS would look for (OST_NAME_STRAY). */
static int check_found(struct fsck *c, struct fsck_ost *o, unsigned dnum, int d, const char *name,
		       enum ost_name_kind kind, uint64_t objid)
{
	char dest[128], tagtxt[80] = "", fix[200], extra[160] = "";
	uint64_t tino = 0, next;
	uint32_t tstripe = 0;
	bool misplaced = kind == OST_NAME_STRAY;
	struct stat st;
	int fd, rc;

	if (fstatat(d, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	if (!misplaced && mdt_fsck_object(c->f, o->conf.idx, objid, NULL, NULL) != MDT_FSCK_OBJ_UNKNOWN)
		return 0;

	fd = openat(d, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		if (read_tag(fd, &tino, &tstripe))
			snprintf(tagtxt, sizeof(tagtxt), ", tagged as %" PRIu64 ":%u", tino, tstripe);
		close(fd);
	}
	next = mdt_fsck_next_objid(c->f, o->conf.idx);
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
		snprintf(what, sizeof(what), "OST %u: file " OST_ODIR_FMT "/%s (%lld bytes%s) is not "
			 "where the OSS looks for any object%s", o->conf.idx, dnum, name,
			 (long long)st.st_size, tagtxt, extra);
		p.what = what;
		p.fix = rc == 0 ? fix : NULL;
		print_problem(NULL, &p);
	} else {
		struct mdt_fsck_problem p = { .kind = MDT_FSCK_ORPHAN_OBJECT };
		char what[600];
		snprintf(what, sizeof(what), "OST %u object %#" PRIx64 " (%lld bytes%s): no layout "
			 "references it%s", o->conf.idx, objid, (long long)st.st_size, tagtxt, extra);
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
	for (unsigned dn = 0; dn < OST_NDIRS; dn++) {
		char path[PATH_MAX + 16];
		int rc = NOFIX_TOOL;

		if (odir(o, dn) >= 0)
			continue;
		snprintf(path, sizeof(path), "%s/" OST_ODIR_FMT, o->dir, dn);
		if (errno != ENOENT) {
			fprintf(stderr, "loom fsck: warning: %s: %s\n", path, strerror(errno));
			continue;
		}
		if (c->repair)
			rc = mkdir_p(path, 0755);
		ost_problem(c, rc == 0 ? "made" : NULL,
			    "OST %u: directory %s is missing (the OSS does not start without it)%s%s%s",
			    o->conf.idx, path, rc < 0 ? " (repair failed: " : "",
			    rc < 0 ? strerror(-rc) : "", rc < 0 ? ")" : "");
	}
}

/* Walks O/00..O/ff of an OST for objects no layout references. */
static int walk_ost(struct fsck *c, struct fsck_ost *o)
{
	int rc = 0;

	for (unsigned dn = 0; dn < OST_NDIRS && rc == 0; dn++) {
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
			fprintf(stderr, "loom fsck: %s/" OST_ODIR_FMT ": %s\n", o->dir, dn, strerror(-rc));
			break;
		}
		while ((de = readdir(dir)) != NULL && rc == 0) {
			uint64_t objid = 0;
			enum ost_name_kind kind = ost_name_parse(de->d_name, dn, &objid);

			/* Objects have hex names; anything else (".crc" checksum sidecars, temporary
			 * files) belongs to the OSS and is left alone. */
			if (kind == OST_NAME_OTHER)
				continue;
			rc = check_found(c, o, dn, d, de->d_name, kind, objid);
		}
		closedir(dir);
		if (rc)
			fprintf(stderr, "loom fsck: %s/" OST_ODIR_FMT ": %s\n", o->dir, dn, strerror(-rc));
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

		if (strcmp(o->conf.fsname, mdt_store_fsname(s)) != 0) {
			fprintf(stderr, "loom fsck: %s belongs to file system '%s', the MDT to '%s'\n",
				o->dir, o->conf.fsname, mdt_store_fsname(s));
			return -EINVAL;
		}
		for (uint32_t k = 0; k < n; k++) {
			if (!strcmp(tab[k].uuid, o->conf.uuid))
				by_uuid = &tab[k];
			if (o->conf.idx != OST_IDX_NONE && tab[k].idx == o->conf.idx)
				by_idx = &tab[k];
		}
		if (by_uuid && o->conf.idx != OST_IDX_NONE && by_uuid->idx != o->conf.idx) {
			fprintf(stderr, "loom fsck: %s says index %u, the MDT has its uuid %s as OST %u\n",
				o->dir, o->conf.idx, o->conf.uuid, by_uuid->idx);
			return -EINVAL;
		}
		if (!by_uuid && by_idx) {
			fprintf(stderr, "loom fsck: %s (uuid %s) says index %u, which the MDT gave to "
					"uuid %s: not this file system's OST, or a replaced one\n",
				o->dir, o->conf.uuid, o->conf.idx, by_idx->uuid);
			return -EINVAL;
		}
		if (!by_uuid) {
			fprintf(stderr, "loom fsck: warning: %s never registered with this MDT: not "
					"checked\n", o->dir);
			o->skip = true;
			continue;
		}
		o->conf.idx = by_uuid->idx;
		for (size_t j = 0; j < i; j++) {
			if (!c->osts[j].skip && c->osts[j].conf.idx == o->conf.idx) {
				fprintf(stderr, "loom fsck: %s and %s are both OST %u\n", c->osts[j].dir,
					o->dir, o->conf.idx);
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
			fprintf(stderr, "loom fsck: %s holds no OST (ost*/" OST_CONF_FILE ")\n", dir);
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
		for (int d = 0; d < OST_NDIRS; d++)
			if (c.osts[i].fd_odir[d] >= 0)
				close(c.osts[i].fd_odir[d]);
	mdt_fsck_free(c.f);
	free(c.osts);
	return rc;
}
