#include "common/jobid.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/u64map.h"
#include "common/util.h"

/* The largest environment read from /proc/PID/environ; a variable past it counts as absent. The
 * kernel caps argv + envp at a quarter of the stack limit, so this covers an 8 MiB stack's. */
#define ENVIRON_MAX (4u << 20)

void jobid_conf_init(struct jobid_conf *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->var, sizeof(c->var), "%s", JOBID_VAR_DEFAULT);
	snprintf(c->name, sizeof(c->name), "%s", JOBID_NAME_DEFAULT);
}

static bool var_is_special(const char *var)
{
	return !strcmp(var, "disable") || !strcmp(var, "procname_uid") || !strcmp(var, "nodelocal");
}

static bool var_name_ok(const char *s)
{
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '_'))
			return false;
	return true;
}

int jobid_conf_set(struct jobid_conf *c, const char *key, const char *value)
{
	size_t len;

	if (!key || !value)
		return -EINVAL;
	len = strlen(value);
	if (!strcmp(key, "jobid_var")) {
		if (len >= sizeof(c->var) || !(var_is_special(value) || var_name_ok(value)))
			return -EINVAL;
		memcpy(c->var, value, len + 1);
		return 0;
	}
	if (!strcmp(key, "jobid_name")) {
		if (len == 0 || len >= sizeof(c->name))
			return -EINVAL;
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)value[i] < 0x20 || (unsigned char)value[i] > 0x7e)
				return -EINVAL;
		memcpy(c->name, value, len + 1);
		return 0;
	}
	return -EINVAL;
}

/* The value of name in a NUL-separated environment block (the first one, as getenv finds), or
 * NULL. The last string may lack its NUL: the block is bounded by len, not by a terminator. */
static const char *env_find(const char *env, size_t len, const char *name, size_t *vlen)
{
	size_t nlen = strlen(name);
	size_t i = 0;

	if (!env)
		return NULL;
	while (i < len) {
		const char *s = env + i;
		const char *nul = memchr(s, '\0', len - i);
		size_t slen = nul ? (size_t)(nul - s) : len - i;

		if (slen > nlen && s[nlen] == '=' && !memcmp(s, name, nlen)) {
			*vlen = slen - nlen - 1;
			return s + nlen + 1;
		}
		i += slen + 1;
	}
	return NULL;
}

/* A job id being written: bytes past LOOM_JOBID_LEN - 1 are dropped. */
struct jobid_buf {
	char *out;
	size_t len;
};

static void put_bytes(struct jobid_buf *b, const char *s, size_t n)
{
	size_t room = LOOM_JOBID_LEN - 1 - b->len;

	if (n > room)
		n = room;
	memcpy(b->out + b->len, s, n);
	b->len += n;
}

static void put_ulong(struct jobid_buf *b, unsigned long v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%lu", v);

	put_bytes(b, num, (size_t)n);
}

/* Whether the pattern uses %j (not "%%j", a percent sign then 'j'). */
static bool pattern_has_j(const char *name)
{
	for (const char *p = name; *p; p++)
		if (*p == '%' && p[1]) {
			p++;
			if (*p == 'j')
				return true;
		}
	return false;
}

/*
 * The job id from its parts: val (vlen bytes, not NUL-terminated) is the process's value of the
 * jobid_var variable, or NULL when it has none or jobid_var is not a variable.
 *
 * A pattern with %j is always used, as Lustre does (lustre_get_jobid): "%j.%e" says how to
 * show the variable, and without this rule %j could only ever be empty.
 */
static void jobid_build(const struct jobid_conf *c, pid_t pid, uid_t uid, gid_t gid, const char *comm,
			const char *val, size_t vlen, char out[LOOM_JOBID_LEN])
{
	struct jobid_buf b = { out, 0 };
	char host[HOST_NAME_MAX + 1];
	bool have_host = false;

	if (!comm)
		comm = "unknown";
	if (!strcmp(c->var, "disable"))
		goto done;
	if (val && vlen && !pattern_has_j(c->name)) {
		put_bytes(&b, val, vlen);
		goto done;
	}
	for (const char *p = c->name; *p && b.len < LOOM_JOBID_LEN - 1; p++) {
		if (*p != '%' || !p[1]) {
			put_bytes(&b, p, 1);
			continue;
		}
		p++;
		switch (*p) {
		case 'e':
			put_bytes(&b, comm, strlen(comm));
			break;
		case 'u':
			put_ulong(&b, (unsigned long)uid);
			break;
		case 'g':
			put_ulong(&b, (unsigned long)gid);
			break;
		case 'p':
			put_ulong(&b, (unsigned long)pid);
			break;
		case 'j':
			if (val)
				put_bytes(&b, val, vlen);
			break;
		case 'h':
		case 'H':
			if (!have_host) {
				if (gethostname(host, sizeof(host)) < 0)
					snprintf(host, sizeof(host), "unknown");
				host[sizeof(host) - 1] = '\0';
				have_host = true;
			}
			put_bytes(&b, host, *p == 'h' ? strcspn(host, ".") : strlen(host));
			break;
		case '%':
			put_bytes(&b, "%", 1);
			break;
		default:
			put_bytes(&b, p - 1, 2);
			break;
		}
	}
done:
	out[b.len] = '\0';
	for (size_t i = 0; i < b.len; i++)
		if ((unsigned char)out[i] <= 0x20 || (unsigned char)out[i] > 0x7e)
			out[i] = '_';
}

void jobid_make(const struct jobid_conf *c, const struct jobid_proc *p, char out[LOOM_JOBID_LEN])
{
	const char *val = NULL;
	size_t vlen = 0;

	if (!var_is_special(c->var))
		val = env_find(p->env, p->env_len, c->var, &vlen);
	jobid_build(c, p->pid, p->uid, p->gid, p->comm, val, vlen, out);
}

/*
 * Reads a whole file into a malloc'd NUL-terminated buffer, at most max bytes (the rest is left
 * unread). Not file_read_all: /proc files say they are 0 bytes long, so this reads to EOF.
 */
static int read_upto(const char *path, size_t max, char **out, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = NULL;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t r;

		if (buf && n >= max)
			break;
		if (!buf || n == cap) {
			char *nb;

			if (buf)
				cap *= 2;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
		}
		r = read(fd, buf + n, MIN(cap, max) - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

/* Reads comm into buf (cap bytes), without its newline: 0 or a negative errno. */
static int read_comm(const char *path, char *buf, size_t cap)
{
	char *s;
	size_t len;
	int rc = read_upto(path, 64, &s, &len);

	if (rc < 0)
		return rc;
	s[strcspn(s, "\n")] = '\0';
	snprintf(buf, cap, "%s", s);
	free(s);
	return 0;
}

void jobid_self(const struct jobid_conf *c, char out[LOOM_JOBID_LEN])
{
	char comm[64];
	const char *val = NULL;

	if (read_comm("/proc/self/comm", comm, sizeof(comm)) < 0) {
		/* No /proc (a chroot, a sandbox): the kernel has the same name for the asking. */
		char name[17] = "";

		if (prctl(PR_GET_NAME, name) < 0)
			snprintf(name, sizeof(name), "unknown");
		snprintf(comm, sizeof(comm), "%s", name);
	}
	if (!var_is_special(c->var))
		val = getenv(c->var);
	jobid_build(c, getpid(), getuid(), getgid(), comm, val, val ? strlen(val) : 0, out);
}

/* One process's job id as read. */
struct jc_ent {
	struct jc_ent *older, *newer; /* the cache's age list */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	uint64_t start;   /* field 22 of /proc/PID/stat: clock ticks after boot */
	uint64_t made_ns; /* when read, clock_mono_ns */
	char jobid[LOOM_JOBID_LEN];
};

struct jobid_cache {
	pthread_mutex_t lock; /* guards everything below but proc_root */
	struct jobid_conf conf;
	uint64_t gen;         /* bumped by set_conf: a job id made under older settings is not kept */
	struct u64map by_pid; /* pid -> struct jc_ent */
	struct jc_ent *oldest, *newest;
	char proc_root[256];  /* set before any get, then only read */
};

int jobid_cache_new(const struct jobid_conf *c, struct jobid_cache **out)
{
	struct jobid_cache *jc = calloc(1, sizeof(*jc));

	if (!jc)
		return -ENOMEM;
	pthread_mutex_init(&jc->lock, NULL);
	if (c)
		jc->conf = *c;
	else
		jobid_conf_init(&jc->conf);
	u64map_init(&jc->by_pid);
	snprintf(jc->proc_root, sizeof(jc->proc_root), "/proc");
	*out = jc;
	return 0;
}

/* Forgets every entry; the caller holds the lock. */
static void cache_clear(struct jobid_cache *jc)
{
	struct jc_ent *e = jc->oldest;

	while (e) {
		struct jc_ent *next = e->newer;

		free(e);
		e = next;
	}
	jc->oldest = jc->newest = NULL;
	u64map_destroy(&jc->by_pid);
}

void jobid_cache_free(struct jobid_cache *jc)
{
	if (!jc)
		return;
	cache_clear(jc);
	pthread_mutex_destroy(&jc->lock);
	free(jc);
}

void jobid_cache_set_conf(struct jobid_cache *jc, const struct jobid_conf *c)
{
	pthread_mutex_lock(&jc->lock);
	jc->conf = *c;
	jc->gen++;
	cache_clear(jc);
	pthread_mutex_unlock(&jc->lock);
}

int jobid_cache_set_proc_root(struct jobid_cache *jc, const char *root)
{
	if (strlen(root) >= sizeof(jc->proc_root))
		return -ENAMETOOLONG;
	snprintf(jc->proc_root, sizeof(jc->proc_root), "%s", root);
	return 0;
}

static uint64_t pid_key(pid_t pid)
{
	return (uint64_t)(uint32_t)pid;
}

static void age_unlink(struct jobid_cache *jc, struct jc_ent *e)
{
	if (e->older)
		e->older->newer = e->newer;
	else
		jc->oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		jc->newest = e->older;
	e->older = e->newer = NULL;
}

static void age_append(struct jobid_cache *jc, struct jc_ent *e)
{
	e->older = jc->newest;
	e->newer = NULL;
	if (jc->newest)
		jc->newest->newer = e;
	else
		jc->oldest = e;
	jc->newest = e;
}

/*
 * The process's start time, field 22 of /proc/PID/stat. Field 2 is the comm in parentheses and
 * may itself hold spaces and ')', so the fields are counted from the last ')'.
 */
static int proc_start(const char *root, pid_t pid, uint64_t *start)
{
	char path[320], *s, *p;
	size_t len;
	int rc;

	if (pid <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "%s/%d/stat", root, (int)pid);
	rc = read_upto(path, 4096, &s, &len);
	if (rc < 0)
		return rc;
	rc = -EINVAL;
	p = strrchr(s, ')');
	if (!p)
		goto out;
	p++;
	/* Fields 3 to 21 (state to itrealvalue): 19 to skip. */
	for (int field = 3; field <= 22; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			goto out;
		if (field == 22) {
			char *end;

			errno = 0;
			*start = strtoull(p, &end, 10);
			if (end != p && !errno)
				rc = 0;
			goto out;
		}
		p += strcspn(p, " ");
	}
out:
	free(s);
	return rc;
}

/*
 * Whether e answers for this pid now. start_known false: the process is gone (or hidden), and
 * the last one read under its pid is the best answer there is. An entry made after now_ns is
 * fresh: another thread read the clock later and made it while this one waited for the lock.
 */
static bool ent_good(const struct jc_ent *e, uid_t uid, gid_t gid, bool start_known, uint64_t start,
		     uint64_t now_ns)
{
	return e->uid == uid && e->gid == gid && (!start_known || e->start == start) &&
	       (now_ns < e->made_ns || now_ns - e->made_ns < JOBID_CACHE_TTL_NS);
}

/* Remembers a job id (the caller holds the lock); without memory, it is simply not kept. */
static void cache_put(struct jobid_cache *jc, pid_t pid, uid_t uid, gid_t gid, uint64_t start,
		      uint64_t now_ns, const char *jobid)
{
	struct jc_ent *e = u64map_get(&jc->by_pid, pid_key(pid));

	if (e) {
		age_unlink(jc, e);
	} else {
		if (jc->by_pid.count >= JOBID_CACHE_MAX) {
			struct jc_ent *old = jc->oldest;

			age_unlink(jc, old);
			u64map_del(&jc->by_pid, pid_key(old->pid));
			free(old);
		}
		e = calloc(1, sizeof(*e));
		if (!e)
			return;
		if (u64map_put(&jc->by_pid, pid_key(pid), e) < 0) {
			free(e);
			return;
		}
	}
	e->pid = pid;
	e->uid = uid;
	e->gid = gid;
	e->start = start;
	e->made_ns = now_ns;
	memcpy(e->jobid, jobid, LOOM_JOBID_LEN);
	age_append(jc, e);
}

void jobid_cache_get_at(struct jobid_cache *jc, pid_t pid, uid_t uid, gid_t gid, uint64_t now_ns,
			char out[LOOM_JOBID_LEN])
{
	struct jobid_conf conf;
	struct jc_ent *e;
	struct jobid_proc p = { .pid = pid, .uid = uid, .gid = gid };
	char path[320], comm[64];
	char *env = NULL;
	uint64_t gen, start = 0, start_after = 0;
	bool start_known;

	/* /proc is read outside the lock: FUSE's threads wait on each other only for the map. */
	start_known = proc_start(jc->proc_root, pid, &start) == 0;
	pthread_mutex_lock(&jc->lock);
	e = u64map_get(&jc->by_pid, pid_key(pid));
	if (e && ent_good(e, uid, gid, start_known, start, now_ns)) {
		memcpy(out, e->jobid, LOOM_JOBID_LEN);
		pthread_mutex_unlock(&jc->lock);
		return;
	}
	conf = jc->conf;
	gen = jc->gen;
	pthread_mutex_unlock(&jc->lock);

	if (start_known) {
		snprintf(path, sizeof(path), "%s/%d/comm", jc->proc_root, (int)pid);
		if (read_comm(path, comm, sizeof(comm)) == 0)
			p.comm = comm;
		if (!var_is_special(conf.var)) {
			snprintf(path, sizeof(path), "%s/%d/environ", jc->proc_root, (int)pid);
			if (read_upto(path, ENVIRON_MAX, &env, &p.env_len) == 0)
				p.env = env;
		}
	}
	jobid_make(&conf, &p, out);
	free(env);
	/*
	 * Kept only when tied to a process, and to the one read: had the pid been reused between the
	 * two reads of its start time, comm and environ may be the newcomer's under the old start.
	 */
	if (!start_known || proc_start(jc->proc_root, pid, &start_after) < 0 || start_after != start)
		return;
	pthread_mutex_lock(&jc->lock);
	if (gen == jc->gen)
		cache_put(jc, pid, uid, gid, start, now_ns, out);
	pthread_mutex_unlock(&jc->lock);
}

void jobid_cache_get(struct jobid_cache *jc, pid_t pid, uid_t uid, gid_t gid, char out[LOOM_JOBID_LEN])
{
	jobid_cache_get_at(jc, pid, uid, gid, clock_mono_ns(), out);
}
