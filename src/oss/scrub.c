/*
 * The scrubber: a background thread per OST (one scrub at a time) reads every block of every
 * object, or of one object, and compares it with its checksum. It reads 1 MiB at a time under
 * a shared range lock, so a writer waits for one chunk at most, and sleeps as needed to stay
 * under its rate, so that clients keep their bandwidth. Each bad block is logged (ERROR, by
 * csum_check) and counted; the status lists the first LW_SCRUB_MAX_BAD bad objects. The status
 * lives in memory only: a restarted OSS reports LW_SCRUB_IDLE.
 */
#include "oss/ost_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define SCRUB_CHUNK_BLOCKS 16u /* blocks read, checked and throttled at a time (1 MiB) */
#define SCRUB_STOPPED      (-ECANCELED)

struct scrub_run {
	struct ost *o;
	uint8_t *buf;     /* SCRUB_CHUNK_BLOCKS blocks */
	uint64_t rate;    /* bytes per second; 0: no limit */
	uint64_t t0_ns;   /* when it started, for the rate limit */
	uint64_t bytes;   /* read since then */
};

void scrub_init(struct ost *o)
{
	pthread_mutex_init(&o->scrub.lock, NULL);
	cond_init_monotonic(&o->scrub.cond);
}

void scrub_fini(struct ost *o)
{
	struct ost_scrub *s = &o->scrub;

	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (s->joinable)
		pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
}

/* Accounts n bytes read and sleeps until the rate allows more. false: asked to stop. A rate
 * changed while it runs starts a new window (the bytes read before were paced at the old one). */
static bool scrub_throttle(struct scrub_run *r, size_t n)
{
	struct ost_scrub *s = &r->o->scrub;
	bool stop;

	r->bytes += n;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		uint64_t due_ns, now = clock_mono_ns();

		if (s->rate != r->rate) {
			r->rate = s->rate;
			r->t0_ns = now;
			r->bytes = n;
		}
		due_ns = r->rate ? r->t0_ns + (uint64_t)((double)r->bytes * 1e9 / (double)r->rate) : 0;
		if (s->stop || now >= due_ns)
			break;
		struct timespec ts = { .tv_sec = (time_t)(due_ns / 1000000000u),
				       .tv_nsec = (long)(due_ns % 1000000000u) };
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	stop = s->stop;
	pthread_mutex_unlock(&s->lock);
	return !stop;
}

void ost_scrub_set_rate(struct ost *o, uint64_t rate)
{
	struct ost_scrub *s = &o->scrub;

	pthread_mutex_lock(&s->lock);
	s->rate = rate;
	if (s->st.state == LW_SCRUB_RUNNING)
		s->st.rate = rate;
	pthread_cond_broadcast(&s->cond); /* a sleep at the old rate ends now */
	pthread_mutex_unlock(&s->lock);
}

uint64_t ost_scrub_rate(struct ost *o)
{
	struct ost_scrub *s = &o->scrub;
	uint64_t rate;

	pthread_mutex_lock(&s->lock);
	rate = s->rate;
	pthread_mutex_unlock(&s->lock);
	return rate;
}

static void scrub_note_bad(struct ost_scrub *s, uint64_t objid)
{
	s->st.bad_objects++;
	if (s->st.nbad < LW_SCRUB_MAX_BAD)
		s->st.bad_objids[s->st.nbad++] = objid;
}

/* Checks one object, chunk by chunk. 0 (also for an object destroyed meanwhile), SCRUB_STOPPED,
 * or the errno of a failed read (the object then counts as bad). */
static int scrub_object(struct scrub_run *r, uint64_t objid)
{
	struct ost *o = r->o;
	struct ost_scrub *s = &o->scrub;
	const size_t chunk = (size_t)SCRUB_CHUNK_BLOCKS << CSUM_SHIFT;
	uint32_t stored[SCRUB_CHUNK_BLOCKS];
	uint64_t bad = 0;
	char name[OST_OBJ_NAME_MAX];
	int fd, cfd, d = ost_obj_dir(objid), rc = 0;

	pthread_mutex_lock(&s->lock);
	rc = s->stop ? SCRUB_STOPPED : 0;
	pthread_mutex_unlock(&s->lock);
	if (rc)
		return rc;
	ost_obj_name(objid, name, sizeof(name));
	fd = openat(o->odir[d], name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	ost_csum_name(objid, name, sizeof(name));
	cfd = openat(o->odir[d], name, O_RDONLY | O_CLOEXEC);
	if (cfd < 0 && errno != ENOENT) {
		rc = -errno;
		close(fd);
		return rc;
	}
	for (uint64_t b = 0;; b += SCRUB_CHUNK_BLOCKS) {
		struct csum_tally t = { 0 };
		struct rl_ent rl;
		size_t got = 0;

		rl_lock(o, &rl, objid, b, b + SCRUB_CHUNK_BLOCKS - 1, false);
		rc = pread_full(fd, r->buf, chunk, b << CSUM_SHIFT, &got);
		if (rc == 0 && got)
			rc = csum_load(cfd, b, SCRUB_CHUNK_BLOCKS, stored);
		if (rc == 0 && got)
			csum_check(o, "scrub", objid, b, r->buf, got, stored, &t);
		rl_unlock(o, &rl);
		if (rc) {
			log_err("OST%04x: scrub: object %llx: cannot read block %llu on: %s", o->conf.idx,
				(unsigned long long)objid, (unsigned long long)b, strerror(-rc));
			bad++;
			break;
		}
		pthread_mutex_lock(&s->lock);
		s->st.bytes_checked += got;
		s->st.blocks_checked += t.checked;
		s->st.blocks_unchecked += t.unchecked;
		s->st.bad_blocks += t.bad;
		pthread_mutex_unlock(&s->lock);
		bad += t.bad;
		if (got < chunk)
			break;
		if (!scrub_throttle(r, got)) {
			rc = SCRUB_STOPPED;
			break;
		}
	}
	if (cfd >= 0)
		close(cfd);
	close(fd);
	if (rc == SCRUB_STOPPED)
		return rc;
	pthread_mutex_lock(&s->lock);
	s->st.objects_checked++;
	if (bad)
		scrub_note_bad(s, objid);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int scrub_all(struct scrub_run *r)
{
	struct ost *o = r->o;
	int rc = 0;

	for (unsigned d = 0; d < OST_NDIRS && rc != SCRUB_STOPPED; d++) {
		int fd = openat(o->odir[d], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct dirent *de;
		DIR *dir;

		if (fd < 0)
			return -errno;
		dir = fdopendir(fd);
		if (!dir) {
			rc = -errno;
			close(fd);
			return rc;
		}
		while (rc != SCRUB_STOPPED && (de = readdir(dir))) {
			uint64_t objid;

			if (ost_name_parse(de->d_name, d, &objid) == OST_NAME_OBJECT)
				rc = scrub_object(r, objid);
		}
		closedir(dir);
	}
	return rc == SCRUB_STOPPED ? rc : 0;
}

static void *scrub_main(void *arg)
{
	struct ost *o = arg;
	struct ost_scrub *s = &o->scrub;
	struct scrub_run r = { .o = o, .t0_ns = clock_mono_ns() };
	struct lw_scrub_rep st;
	uint64_t objid;
	int rc;

	pthread_mutex_lock(&s->lock);
	objid = s->st.objid;
	r.rate = s->st.rate;
	pthread_mutex_unlock(&s->lock);
	r.buf = malloc((size_t)SCRUB_CHUNK_BLOCKS << CSUM_SHIFT);
	if (!r.buf)
		rc = -ENOMEM;
	else if (objid)
		rc = scrub_object(&r, objid);
	else
		rc = scrub_all(&r);
	free(r.buf);

	pthread_mutex_lock(&s->lock);
	s->st.error = rc;
	s->st.state = LW_SCRUB_DONE;
	s->st.finish_time = (int64_t)time(NULL);
	st = s->st;
	pthread_mutex_unlock(&s->lock);
	/* Nothing after this takes s->lock: ost_scrub_start may be joining this thread. */
	if (rc == SCRUB_STOPPED)
		log_info("OST%04x: scrub stopped", o->conf.idx);
	else
		log_info("OST%04x: scrub done: %llu objects, %llu bytes, %llu blocks checked, %llu "
			 "without checksums, %llu bad blocks in %llu objects%s%s",
			 o->conf.idx, (unsigned long long)st.objects_checked,
			 (unsigned long long)st.bytes_checked, (unsigned long long)st.blocks_checked,
			 (unsigned long long)st.blocks_unchecked, (unsigned long long)st.bad_blocks,
			 (unsigned long long)st.bad_objects, rc ? "; ended by " : "",
			 rc ? strerror(-rc) : "");
	return NULL;
}

int ost_scrub_start(struct ost *o, uint64_t objid, struct lw_scrub_rep *st)
{
	struct ost_scrub *s = &o->scrub;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (s->st.state != LW_SCRUB_RUNNING && !s->stop) {
		if (s->joinable) {
			/* The last scrub is done; its thread has left (or is leaving) the lock for good. */
			pthread_join(s->thread, NULL);
			s->joinable = false;
		}
		memset(&s->st, 0, sizeof(s->st));
		s->st.state = LW_SCRUB_RUNNING;
		s->st.objid = objid;
		s->st.rate = s->rate;
		s->st.start_time = (int64_t)time(NULL);
		if (pthread_create(&s->thread, NULL, scrub_main, o) == 0) {
			s->joinable = true;
			/* Logged here, before the reply: the log says it started once the admin hears so. */
			if (objid)
				log_info("OST%04x: scrub of object %llx started", o->conf.idx,
					 (unsigned long long)objid);
			else
				log_info("OST%04x: scrub started (at most %llu MiB/s)", o->conf.idx,
					 (unsigned long long)(s->rate >> 20));
		} else {
			memset(&s->st, 0, sizeof(s->st));
			rc = -EAGAIN;
		}
	}
	*st = s->st;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void ost_scrub_status(struct ost *o, struct lw_scrub_rep *st)
{
	pthread_mutex_lock(&o->scrub.lock);
	*st = o->scrub.st;
	pthread_mutex_unlock(&o->scrub.lock);
}
