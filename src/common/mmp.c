/*
 * Multi-mount protection (mmp.h): the heartbeat block, its checks at a start, and the thread that
 * keeps it while a server holds its target.
 *
 * The block is one 4 KiB page at the start of the file `mmp`, written with O_DIRECT where the
 * file system takes it (a shared disk's other host must see it, not this host's page cache) and
 * synced after each beat.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/crc.h"
#include "common/log.h"
#include "common/mmp.h"
#include "common/util.h"

#define MMP_MAGIC     0x504D4D4Cu /* "LMMP" */
#define MMP_VERSION   1u
#define MMP_SEQ_CLEAN UINT64_MAX
#define MMP_BLOCK     4096u

struct mmp_block {
	uint32_t magic;
	uint32_t version;
	uint64_t seq;          /* bumped every beat; MMP_SEQ_CLEAN after a clean stop */
	uint64_t id;           /* the holder's, random at its start */
	uint64_t time_s;       /* wall clock of the last beat (for people) */
	uint32_t interval_ms;
	uint32_t crc;          /* crc32c of the block with this field 0 */
	char node[64];
	char server[64];
};

struct mmp {
	int fd;
	uint8_t *page;         /* MMP_BLOCK bytes, aligned for O_DIRECT */
	struct mmp_block mine;
	uint32_t interval_ms;
	void (*on_lost)(void *arg, const char *why);
	void *arg;
	bool own_arg;          /* arg is malloc'd, the mmp's to free (mmp_take's) */
	_Atomic uint64_t ours_ns; /* clock_mono_ns() when the block was last seen to be ours */
	atomic_bool lost;      /* on_lost was called: mmp_check fails from then on */
	/* The holder this one took the target from, as last seen (under check_lock): its one late
	 * beat may land over ours (see stall_limit_ns). */
	bool displaced;
	uint64_t displaced_id, displaced_seq;
	pthread_mutex_t check_lock; /* the block read or written once held (beats, mmp_check) */
	uint8_t *check_page;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stopping;
};

static uint32_t block_crc(const struct mmp_block *b)
{
	struct mmp_block c = *b;

	c.crc = 0;
	return crc32c(0, &c, sizeof(c));
}

/* 1 with *b read, 0 for an empty file (never held), -EINVAL for one that is not a heartbeat. */
static int read_block_into(struct mmp *m, uint8_t *page, struct mmp_block *b)
{
	ssize_t n = pread(m->fd, page, MMP_BLOCK, 0);

	if (n < 0)
		return -errno;
	if (n == 0)
		return 0;
	if ((size_t)n < sizeof(*b))
		return -EINVAL;
	memcpy(b, page, sizeof(*b));
	if (b->magic != MMP_MAGIC || b->version != MMP_VERSION || b->crc != block_crc(b))
		return -EINVAL;
	b->node[sizeof(b->node) - 1] = b->server[sizeof(b->server) - 1] = '\0';
	return 1;
}

static int read_block(struct mmp *m, struct mmp_block *b)
{
	return read_block_into(m, m->page, b);
}

static int write_block(struct mmp *m, struct mmp_block *b)
{
	struct timespec now = clock_real();

	b->time_s = (uint64_t)now.tv_sec;
	b->crc = block_crc(b);
	memset(m->page, 0, MMP_BLOCK);
	memcpy(m->page, b, sizeof(*b));
	if (pwrite(m->fd, m->page, MMP_BLOCK, 0) != (ssize_t)MMP_BLOCK)
		return errno ? -errno : -EIO;
	return fdatasync(m->fd) < 0 ? -errno : 0;
}

static void holder_of(const struct mmp_block *b, struct mmp_holder *h)
{
	if (!h)
		return;
	memset(h, 0, sizeof(*h));
	snprintf(h->node, sizeof(h->node), "%s", b->node);
	snprintf(h->server, sizeof(h->server), "%s", b->server);
	h->interval_ms = b->interval_ms;
	h->clean = b->seq == MMP_SEQ_CLEAN;
}

static bool same_beat(const struct mmp_block *a, const struct mmp_block *b)
{
	return a->id == b->id && a->seq == b->seq;
}

static int open_file(const char *dir, struct mmp *m, int flags)
{
	char path[4096];

	if (snprintf(path, sizeof(path), "%s/%s", dir, MMP_FILE) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	m->fd = open(path, flags | O_CLOEXEC | O_DIRECT, 0600);
	if (m->fd < 0 && errno == EINVAL) /* a file system without O_DIRECT (tmpfs) */
		m->fd = open(path, flags | O_CLOEXEC, 0600);
	return m->fd < 0 ? -errno : 0;
}

static void mmp_free(struct mmp *m)
{
	if (m->fd >= 0)
		close(m->fd);
	free(m->page);
	free(m->check_page);
	free(m);
}

/* Sleeps ms, or less when the holder stops; true if it stops. */
static bool nap(struct mmp *m, uint32_t ms)
{
	struct timespec until;
	bool stop;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&m->lock);
	while (!m->stopping && pthread_cond_timedwait(&m->cond, &m->lock, &until) == 0)
		;
	stop = m->stopping;
	pthread_mutex_unlock(&m->lock);
	return stop;
}

/*
 * A beat stalled between its read and its write (a process frozen there) may land over the
 * block of a server that took the target meanwhile, erasing the sign of it. A takeover needs the
 * block unchanged for 2 intervals + 100 ms after its own write (mmp_acquire), so only a beat
 * whose write ended longer than that after its read began can have done so: such a beat counts
 * as lost (the other server, finding our block over its own, stops too: neither serves, never
 * both).
 */
static uint64_t stall_limit_ns(const struct mmp *m)
{
	return (2ull * m->interval_ms + 100) * 1000000ull;
}

/*
 * b, found where our beat should be, is the late beat of the holder we displaced: its id, one beat
 * past what we saw of it. Only a beat stalled past stall_limit_ns lands so late, and its writer
 * counts itself lost and stops: we write ours again (once) instead of stopping too. Under
 * check_lock; 0 when it was that and ours is back.
 */
static int take_back_from_late_beat(struct mmp *m, const struct mmp_block *b)
{
	int rc;

	if (!m->displaced || b->id != m->displaced_id || b->seq != m->displaced_seq + 1)
		return -EBUSY;
	m->displaced = false;
	m->mine.seq++;
	rc = write_block(m, &m->mine);
	if (rc == 0)
		log_warn("multi-mount protection: the server we took the target from (%s, %s) wrote one "
			 "late heartbeat; ours is written again", b->node, b->server);
	return rc;
}

static void beat_lost(struct mmp *m, const char *why)
{
	atomic_store(&m->lost, true);
	pthread_mutex_unlock(&m->check_lock);
	m->on_lost(m->arg, why);
}

static void *beat_main(void *arg)
{
	struct mmp *m = arg;
	char why[256];

	while (!nap(m, m->interval_ms)) {
		struct mmp_block b;
		uint64_t read_ns, took_ns;
		int rc;

		/* mmp_check reads the same block: never while it is half written. */
		pthread_mutex_lock(&m->check_lock);
		read_ns = clock_mono_ns();
		rc = read_block(m, &b);
		if (rc == 1 && !same_beat(&b, &m->mine) && take_back_from_late_beat(m, &b) == 0) {
			atomic_store(&m->ours_ns, read_ns);
			pthread_mutex_unlock(&m->check_lock);
			continue;
		}
		if (rc == 1 && !same_beat(&b, &m->mine)) {
			snprintf(why, sizeof(why), "%s (%s) took the target: its heartbeat replaced ours",
				 b.node, b.server);
			beat_lost(m, why);
			return NULL;
		}
		m->mine.seq++;
		if (rc != 1 || (rc = write_block(m, &m->mine)) != 0) {
			snprintf(why, sizeof(why), "the heartbeat cannot be %s: %s", rc == 1 ? "written" : "read",
				 rc == 1 ? strerror(-rc) : rc == 0 ? "gone" : strerror(-rc));
			beat_lost(m, why);
			return NULL;
		}
		took_ns = clock_mono_ns() - read_ns;
		if (took_ns > stall_limit_ns(m)) {
			snprintf(why, sizeof(why), "a heartbeat took %llu ms from its read to its write: "
				 "another server may have taken the target meanwhile",
				 (unsigned long long)(took_ns / 1000000u));
			beat_lost(m, why);
			return NULL;
		}
		atomic_store(&m->ours_ns, read_ns);
		pthread_mutex_unlock(&m->check_lock);
	}
	return NULL;
}

int mmp_acquire(const char *dir, const char *server, uint32_t interval_ms, void (*on_lost)(void *arg, const char *why),
		void *arg, struct mmp_holder *holder, struct mmp **out)
{
	struct mmp *m = calloc(1, sizeof(*m));
	struct mmp_block b, again;
	uint32_t wait_ms;
	int rc, got;

	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->fd = -1;
	if (interval_ms < MMP_INTERVAL_MIN || interval_ms > MMP_INTERVAL_MAX || !on_lost) {
		mmp_free(m);
		return -EINVAL;
	}
	m->interval_ms = interval_ms;
	m->on_lost = on_lost;
	m->arg = arg;
	if (posix_memalign((void **)&m->page, MMP_BLOCK, MMP_BLOCK) != 0) {
		m->page = NULL;
		mmp_free(m);
		return -ENOMEM;
	}
	rc = open_file(dir, m, O_RDWR | O_CREAT);
	got = rc ? rc : read_block(m, &b);
	if (got < 0 && got != -EINVAL) {
		mmp_free(m);
		return got;
	}
	/* Someone's heartbeat that was not stopped cleanly: alive if it moves within two of its
	 * intervals (or ours, if longer). */
	if (got == 1 && b.seq != MMP_SEQ_CLEAN) {
		wait_ms = 2 * (b.interval_ms > interval_ms && b.interval_ms <= MMP_INTERVAL_MAX ? b.interval_ms :
										     interval_ms) + 100;
		sleep_ms(wait_ms);
		if (read_block(m, &again) == 1 && !same_beat(&again, &b)) {
			holder_of(&again, holder);
			mmp_free(m);
			return -EBUSY;
		}
		m->displaced = true;
		m->displaced_id = b.id;
		m->displaced_seq = b.seq;
	}
	/* Ours, then a check that nobody else wrote one while we did. */
	memset(&m->mine, 0, sizeof(m->mine));
	m->mine.magic = MMP_MAGIC;
	m->mine.version = MMP_VERSION;
	m->mine.seq = 1;
	m->mine.interval_ms = interval_ms;
	if (random_bytes(&m->mine.id, sizeof(m->mine.id)) != 0)
		m->mine.id = clock_mono_ns() ^ (uint64_t)getpid();
	if (gethostname(m->mine.node, sizeof(m->mine.node) - 1) != 0)
		snprintf(m->mine.node, sizeof(m->mine.node), "?");
	snprintf(m->mine.server, sizeof(m->mine.server), "%s", server);
	rc = write_block(m, &m->mine);
	if (rc) {
		mmp_free(m);
		return rc;
	}
	sleep_ms(2 * interval_ms + 100);
	got = read_block(m, &again);
	if (got != 1 || !same_beat(&again, &m->mine)) {
		if (got == 1)
			holder_of(&again, holder);
		mmp_free(m);
		return got == 1 ? -EBUSY : got < 0 ? got : -EIO;
	}
	if (posix_memalign((void **)&m->check_page, MMP_BLOCK, MMP_BLOCK) != 0) {
		m->check_page = NULL;
		mmp_free(m);
		return -ENOMEM;
	}
	atomic_init(&m->ours_ns, clock_mono_ns());
	pthread_mutex_init(&m->check_lock, NULL);
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	rc = -pthread_create(&m->thread, NULL, beat_main, m);
	if (rc) {
		pthread_mutex_destroy(&m->lock);
		pthread_cond_destroy(&m->cond);
		mmp_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void mmp_release(struct mmp *m)
{
	struct mmp_block b;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_signal(&m->cond);
	pthread_mutex_unlock(&m->lock);
	pthread_join(m->thread, NULL);
	/* Clean only if it is still ours: a target taken from us is not ours to mark. */
	if (read_block(m, &b) == 1 && same_beat(&b, &m->mine)) {
		m->mine.seq = MMP_SEQ_CLEAN;
		write_block(m, &m->mine);
	}
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->check_lock);
	pthread_cond_destroy(&m->cond);
	if (m->own_arg)
		free(m->arg);
	mmp_free(m);
}

int mmp_read_holder(const char *dir, struct mmp_holder *out)
{
	struct mmp *m = calloc(1, sizeof(*m));
	struct mmp_block b;
	int rc;

	if (!m)
		return -ENOMEM;
	m->fd = -1;
	if (posix_memalign((void **)&m->page, MMP_BLOCK, MMP_BLOCK) != 0) {
		m->page = NULL;
		mmp_free(m);
		return -ENOMEM;
	}
	rc = open_file(dir, m, O_RDONLY);
	if (rc == 0)
		rc = read_block(m, &b);
	if (rc == 1)
		holder_of(&b, out);
	mmp_free(m);
	return rc == 1 ? 0 : rc == 0 ? -ENOENT : rc;
}

int mmp_check(struct mmp *m)
{
	struct mmp_block b;
	char why[256];
	int rc;

	if (m && atomic_load(&m->lost))
		return -EIO;
	if (!m || clock_mono_ns() - atomic_load(&m->ours_ns) < (uint64_t)m->interval_ms * 1000000u)
		return 0;
	/* The last beat is older than an interval: this process may have been frozen while the
	 * partner took the target. Look at the disk before writing. */
	pthread_mutex_lock(&m->check_lock);
	if (clock_mono_ns() - atomic_load(&m->ours_ns) < (uint64_t)m->interval_ms * 1000000u) {
		pthread_mutex_unlock(&m->check_lock); /* another caller, or a beat, looked meanwhile */
		return 0;
	}
	if (atomic_load(&m->lost)) {
		pthread_mutex_unlock(&m->check_lock); /* the beat thread found it so meanwhile */
		return -EIO;
	}
	rc = read_block_into(m, m->check_page, &b);
	if (rc == 1 && b.id != m->mine.id && take_back_from_late_beat(m, &b) == 0)
		b.id = m->mine.id;
	if (rc == 1 && b.id != m->mine.id) {
		snprintf(why, sizeof(why), "%s (%s) took the target: its heartbeat replaced ours (seen "
			 "before a write)", b.node, b.server);
		atomic_store(&m->lost, true);
		m->on_lost(m->arg, why);
		rc = -EIO; /* an on_lost that returns (tests): still not ours */
	}
	if (rc == 1)
		atomic_store(&m->ours_ns, clock_mono_ns());
	pthread_mutex_unlock(&m->check_lock);
	return rc == 1 ? 0 : -EIO;
}

/* A server's target taken from it (a failover while it hung) or its heartbeat not kept: not one
 * more write may reach the target. */
static void lost_exit(void *arg, const char *why)
{
	log_err("%s: multi-mount protection lost: %s; stopping at once", (const char *)arg, why);
	_exit(3);
}

int mmp_take(const char *dir, const char *kind, const char *prog, uint32_t interval_ms, struct mmp **out)
{
	struct mmp_holder h = { 0 };
	char who[64], *what;
	int rc;

	*out = NULL;
	if (interval_ms == 0) {
		/* Protection belongs to the target, as ldiskfs's mmp feature to the disk: a server
		 * started without it keeps it on a target that has it. */
		rc = mmp_read_holder(dir, &h);
		if (rc == -ENOENT)
			return 0;
		if (rc) {
			log_err("the %s in %s has a multi-mount protection file (%s/%s) that cannot be read: "
				"%s; not starting (if no other server can reach it, remove the file)", kind,
				dir, dir, MMP_FILE, strerror(-rc));
			return rc;
		}
		interval_ms = h.interval_ms < MMP_INTERVAL_MIN ? MMP_INTERVAL_MIN
			    : h.interval_ms > MMP_INTERVAL_MAX ? MMP_INTERVAL_MAX : h.interval_ms;
		memset(&h, 0, sizeof(h));
	}
	if (asprintf(&what, "%s %s", kind, dir) < 0)
		return -ENOMEM;
	snprintf(who, sizeof(who), "%s pid %d", prog, (int)getpid());
	log_info("%s: multi-mount protection: making sure no other server holds it (%u ms heartbeat)",
		 what, interval_ms);
	rc = mmp_acquire(dir, who, interval_ms, lost_exit, what, &h, out);
	if (rc == -EBUSY)
		log_err("the %s in %s is in use by %s on %s: its multi-mount protection heartbeat is "
			"alive; not starting (stop that server first, or wait for its failover)", kind, dir,
			h.server, h.node);
	else if (rc)
		log_err("multi-mount protection on %s: %s", dir, strerror(-rc));
	if (rc)
		free(what);
	else
		(*out)->own_arg = true; /* the heartbeat's until mmp_release */
	return rc;
}
