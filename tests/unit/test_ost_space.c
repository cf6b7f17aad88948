/*
 * OST_FALLOCATE and OST_SEEK on a real OST directory (src/oss/ost_space.c): each mode against a
 * model of the object's bytes, the checksums each leaves (what reads and the scrubber compare),
 * a corrupted block that a punch must not bless, missing objects, and seeks. Every test runs on
 * the disk under /tmp (ext4 here) and on tmpfs (/dev/shm), which has no ZERO_RANGE: there the
 * OSS gets its effect by other means.
 */
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"
#include "oss/ost_impl.h"

int check_failures;
const char *check_current = "";

#define B ((uint64_t)CSUM_BLOCK)
#define KEEP  LW_FALLOC_KEEP_SIZE
#define PUNCH (LW_FALLOC_PUNCH_HOLE | LW_FALLOC_KEEP_SIZE)
#define ZERO  LW_FALLOC_ZERO_RANGE

static const char *base = "/tmp";
static char dir[PATH_MAX];
static struct ost *ost;

/* ---- an OST in a fresh directory, and the bytes an object must hold ---- */

static void ost_up(void)
{
	snprintf(dir, sizeof(dir), "%s/loom-test-ost-XXXXXX", base);
	REQUIRE(mkdtemp(dir) != NULL);
	REQUIRE_RC(ost_format(dir, "t", OST_IDX_NONE, false), 0);
	REQUIRE_RC(ost_open(dir, &ost), 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void ost_down(void)
{
	ost_close(ost);
	ost = NULL;
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

struct model {
	uint8_t *data;
	uint64_t size;
};

static void model_grow(struct model *m, uint64_t size)
{
	if (size <= m->size)
		return;
	m->data = realloc(m->data, size);
	REQUIRE(m->data);
	memset(m->data + m->size, 0, size - m->size);
	m->size = size;
}

static void model_fallocate(struct model *m, uint32_t mode, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;

	if ((mode & (LW_FALLOC_PUNCH_HOLE | LW_FALLOC_ZERO_RANGE)) && off < m->size)
		memset(m->data + off, 0, (end < m->size ? end : m->size) - off);
	if (!(mode & KEEP))
		model_grow(m, end);
}

static void write_random(uint64_t objid, struct model *m, uint64_t off, uint64_t len)
{
	struct ost_objstat st;

	model_grow(m, off + len);
	for (uint64_t i = 0; i < len; i++)
		m->data[off + i] = (uint8_t)(rand() | 1); /* never 0: data is data */
	REQUIRE_RC(ost_write(ost, objid, off, m->data + off, len, 7, 1, 0, &st), 0);
}

static void path_of(uint64_t objid, const char *suffix, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/O/%02x/%llx%s", dir, (unsigned)(objid & 0xff), (unsigned long long)objid, suffix);
}

/* Entry i of the object's sidecar (CSUM_NONE past its end or without one). */
static uint32_t entry(uint64_t objid, uint64_t i)
{
	char path[PATH_MAX];
	uint32_t crc = CSUM_NONE;
	int fd;

	path_of(objid, OST_CSUM_SUFFIX, path, sizeof(path));
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		if (pread(fd, &crc, sizeof(crc), (off_t)(i * sizeof(crc))) != (ssize_t)sizeof(crc))
			crc = CSUM_NONE;
		close(fd);
	}
	return crc;
}

static uint32_t model_crc(const struct model *m, uint64_t b)
{
	uint64_t at = b * B;

	return csum_block(m->data + at, at + B <= m->size ? B : m->size - at);
}

/* The object reads as the model, and every block's entry is none or right (the scrubber's view:
 * no block may read as bad). */
static void check_object(uint64_t objid, const struct model *m)
{
	uint8_t *buf = malloc(m->size + B);
	struct ost_objstat st;
	size_t n;

	REQUIRE(buf);
	CHECK_RC(ost_read(ost, objid, 0, buf, m->size + B, &n, &st), 0);
	CHECK_EQ(n, m->size);
	CHECK_EQ(st.size, m->size);
	CHECK(memcmp(buf, m->data, m->size) == 0);
	for (uint64_t b = 0; b * B < m->size; b++) {
		uint32_t e = entry(objid, b);
		if (e != CSUM_NONE && e != model_crc(m, b))
			CHECK_FAIL_("object %llx block %llu: entry %08x, data %08x", (unsigned long long)objid,
				    (unsigned long long)b, e, model_crc(m, b));
	}
	free(buf);
}

static uint64_t blocks_of(uint64_t objid)
{
	struct ost_objstat st;

	CHECK_RC(ost_getattr(ost, objid, &st), 0);
	return st.blocks;
}

/* ---- the tests ---- */

static void test_punch_and_zero_keep_checksums_right(void)
{
	struct model m = { 0 };
	struct ost_objstat st;
	uint64_t id = 0x101, before;

	ost_up();
	write_random(id, &m, 0, 5 * B + 1000);
	before = blocks_of(id);
	/* Blocks 1 and 2 whole (no checksum, as holes), 0 and 3 in part (theirs now). */
	CHECK_RC(ost_fallocate(ost, id, PUNCH, B / 2, 3 * B + 100 - B / 2, 0, 0, 0, &st), 0);
	model_fallocate(&m, PUNCH, B / 2, 3 * B + 100 - B / 2);
	check_object(id, &m);
	CHECK_EQ(entry(id, 0), model_crc(&m, 0));
	CHECK_EQ(entry(id, 1), CSUM_NONE);
	CHECK_EQ(entry(id, 2), CSUM_NONE);
	CHECK_EQ(entry(id, 3), model_crc(&m, 3));
	CHECK_EQ(entry(id, 4), model_crc(&m, 4));
	CHECK(st.blocks < before);
	CHECK_EQ(st.size, m.size);
	/* Zeroing across the end grows the object; the block it cuts keeps a right checksum. */
	CHECK_RC(ost_fallocate(ost, id, ZERO, 5 * B + 500, 2 * B - 497, 0, 0, 0, &st), 0);
	model_fallocate(&m, ZERO, 5 * B + 500, 2 * B - 497);
	CHECK_EQ(st.size, 7 * B + 3);
	check_object(id, &m);
	CHECK_EQ(entry(id, 5), model_crc(&m, 5));
	CHECK_EQ(entry(id, 6), CSUM_NONE);
	/* Inside one block, both ends unaligned; then with KEEP_SIZE past the end: nothing moves. */
	CHECK_RC(ost_fallocate(ost, id, ZERO | KEEP, 4 * B + 7, 100, 0, 0, 0, &st), 0);
	model_fallocate(&m, ZERO | KEEP, 4 * B + 7, 100);
	CHECK_RC(ost_fallocate(ost, id, ZERO | KEEP, 8 * B, 3 * B, 0, 0, 0, &st), 0);
	CHECK_RC(ost_fallocate(ost, id, PUNCH, 7 * B + 3, 1, 0, 0, 0, &st), 0);
	CHECK_EQ(st.size, 7 * B + 3);
	check_object(id, &m);
	CHECK_EQ(entry(id, 4), model_crc(&m, 4));
	/* A write over a punched block gives it a checksum again. */
	write_random(id, &m, B + 100, 10);
	check_object(id, &m);
	CHECK_EQ(entry(id, 1), model_crc(&m, 1));
	free(m.data);
	ost_down();
}

static void test_allocate_keeps_bytes_and_checksums(void)
{
	struct model m = { 0 };
	struct ost_objstat st;
	uint32_t crcs[3];
	uint64_t id = 0x202, blocks;

	ost_up();
	write_random(id, &m, 0, 2 * B + 5);
	for (int i = 0; i < 3; i++)
		crcs[i] = entry(id, (uint64_t)i);
	/* Over data and past it: the bytes, and so the checksums, stay; the object grows. */
	CHECK_RC(ost_fallocate(ost, id, 0, B, 4 * B, 0, 0, 0, &st), 0);
	model_fallocate(&m, 0, B, 4 * B);
	CHECK_EQ(st.size, 5 * B);
	check_object(id, &m);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(entry(id, (uint64_t)i), crcs[i]);
	/* KEEP_SIZE past the end: space, not size; a truncate that does not shrink gives it back. */
	blocks = st.blocks;
	CHECK_RC(ost_fallocate(ost, id, KEEP, 20 * B, 16 * B, 0, 0, 0, &st), 0);
	CHECK_EQ(st.size, 5 * B);
	CHECK(st.blocks >= blocks + 16 * B / 512);
	CHECK_RC(ost_punch(ost, id, 5 * B, 0, 0, 0, &st), 0);
	CHECK_EQ(st.size, 5 * B);
	CHECK_EQ(st.blocks, blocks);
	check_object(id, &m);
	free(m.data);
	ost_down();
}

static void test_missing_objects(void)
{
	char path[PATH_MAX], tag[64];
	struct ost_objstat st;
	struct stat sb;
	uint64_t found = 1;
	ssize_t n;

	ost_up();
	/* Nothing to punch or zero in an object never written: it stays missing. */
	CHECK_RC(ost_fallocate(ost, 0x303, PUNCH, 0, B, 0, 0, 0, &st), 0);
	CHECK_RC(ost_fallocate(ost, 0x303, ZERO, 0, B, 0, 0, 0, &st), 0);
	CHECK_EQ(st.size, 0);
	path_of(0x303, "", path, sizeof(path));
	CHECK(stat(path, &sb) < 0 && errno == ENOENT);
	CHECK_RC(ost_seek(ost, 0x303, LW_SEEK_DATA, 0, &found, &st), -ENXIO);
	CHECK_RC(ost_seek(ost, 0x303, LW_SEEK_HOLE, 12345, &found, &st), 0);
	CHECK_EQ(found, 12345);
	/* Allocating makes it, tagged with its file as a first write does. */
	CHECK_RC(ost_fallocate(ost, 0x303, 0, B, 3 * B, 42, 3, 0, &st), 0);
	CHECK_EQ(st.size, 4 * B);
	CHECK(stat(path, &sb) == 0 && sb.st_size == (off_t)(4 * B));
	n = getxattr(path, "user.loom.fid", tag, sizeof(tag) - 1);
	if (n >= 0 || errno != ENOTSUP) {
		REQUIRE(n > 0);
		tag[n] = '\0';
		CHECK(strcmp(tag, "42:3") == 0);
	}
	ost_down();
}

static void test_a_bad_block_is_not_blessed(void)
{
	struct model m = { 0 };
	struct ost_objstat st;
	char path[PATH_MAX];
	uint8_t byte;
	uint64_t id = 0x404;
	size_t n;
	int fd;

	ost_up();
	write_random(id, &m, 0, 3 * B);
	/* A byte of block 1 flips on disk. */
	path_of(id, "", path, sizeof(path));
	fd = open(path, O_RDWR);
	REQUIRE(fd >= 0);
	REQUIRE(pread(fd, &byte, 1, (off_t)(B + 300)) == 1);
	byte ^= 0x5a;
	REQUIRE(pwrite(fd, &byte, 1, (off_t)(B + 300)) == 1);
	/* A punch or zeroing that keeps part of it: -EIO, and it changed nothing. */
	CHECK_RC(ost_fallocate(ost, id, PUNCH, B + 10, 10, 0, 0, 0, &st), -EIO);
	CHECK_RC(ost_fallocate(ost, id, ZERO, 2 * B - 10, 20, 0, 0, 0, &st), -EIO);
	REQUIRE(pread(fd, &byte, 1, (off_t)(B + 15)) == 1);
	CHECK_EQ(byte, m.data[B + 15]);
	/* Both partly covered blocks are checked first: the good one before the bad is untouched. */
	CHECK_RC(ost_fallocate(ost, id, PUNCH, B / 2, B, 0, 0, 0, &st), -EIO);
	REQUIRE(pread(fd, &byte, 1, (off_t)(B / 2)) == 1);
	CHECK_EQ(byte, m.data[B / 2]);
	CHECK_EQ(entry(id, 0), model_crc(&m, 0));
	CHECK_EQ(entry(id, 1), model_crc(&m, 1));
	close(fd);
	/* One that covers the block whole heals it; the others were never touched. */
	CHECK_RC(ost_fallocate(ost, id, ZERO | KEEP, B, B, 0, 0, 0, &st), 0);
	model_fallocate(&m, ZERO | KEEP, B, B);
	check_object(id, &m);
	CHECK_RC(ost_read(ost, id, 0, m.data, 1, &n, &st), 0); /* reads work again */
	free(m.data);
	ost_down();
}

static void test_long_ranges_and_sidecar_holes(void)
{
	struct model m = { 0 };
	struct ost_objstat st;
	uint64_t id = 0x505;

	ost_up();
	/* A sparse object with entries up to block 2000: a sidecar longer than a page. */
	write_random(id, &m, 0, B + 3);
	write_random(id, &m, 1500 * B + 17, B);
	write_random(id, &m, 2000 * B, 100);
	CHECK_EQ(entry(id, 1500), model_crc(&m, 1500));
	CHECK_RC(ost_fallocate(ost, id, PUNCH, 10, 1ull << 40, 0, 0, 0, &st), 0);
	model_fallocate(&m, PUNCH, 10, 1ull << 40);
	CHECK_EQ(st.size, m.size);
	check_object(id, &m);
	CHECK_EQ(entry(id, 0), model_crc(&m, 0));
	for (uint64_t b = 1; b <= 2000; b++)
		if (entry(id, b) != CSUM_NONE)
			CHECK_FAIL_("block %llu kept an entry", (unsigned long long)b);
	free(m.data);
	ost_down();
}

static void test_seek(void)
{
	struct model m = { 0 };
	struct ost_objstat st;
	uint64_t id = 0x606, found = 0;

	ost_up();
	write_random(id, &m, 0, 4 * B);
	CHECK_RC(ost_fallocate(ost, id, PUNCH, B / 2, 2 * B, 0, 0, 0, &st), 0);
	/* Data [0, B/2), a hole [B/2, 5B/2), data to 4B: page-aligned, so exact on both. */
	CHECK_RC(ost_seek(ost, id, LW_SEEK_HOLE, 0, &found, &st), 0);
	CHECK_EQ(found, B / 2);
	CHECK_RC(ost_seek(ost, id, LW_SEEK_DATA, B / 2, &found, &st), 0);
	CHECK_EQ(found, 5 * B / 2);
	CHECK_RC(ost_seek(ost, id, LW_SEEK_DATA, 3 * B, &found, &st), 0);
	CHECK_EQ(found, 3 * B);
	CHECK_RC(ost_seek(ost, id, LW_SEEK_HOLE, 3 * B, &found, &st), 0);
	CHECK_EQ(found, 4 * B);
	CHECK_EQ(st.size, 4 * B);
	/* At or past the end: no data, and a hole right there. */
	CHECK_RC(ost_seek(ost, id, LW_SEEK_DATA, 4 * B, &found, &st), -ENXIO);
	CHECK_RC(ost_seek(ost, id, LW_SEEK_HOLE, 9 * B + 1, &found, &st), 0);
	CHECK_EQ(found, 9 * B + 1);
	free(m.data);
	ost_down();
}

static void run_all(void)
{
	RUN(test_punch_and_zero_keep_checksums_right);
	RUN(test_allocate_keeps_bytes_and_checksums);
	RUN(test_missing_objects);
	RUN(test_a_bad_block_is_not_blessed);
	RUN(test_long_ranges_and_sidecar_holes);
	RUN(test_seek);
}

int main(void)
{
	struct stat sb;

	srand(2026);
	run_all();
	/* Again on tmpfs, whose lack of ZERO_RANGE takes the other paths. */
	if (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode)) {
		base = "/dev/shm";
		fprintf(stderr, "on %s:\n", base);
		run_all();
	}
	return check_report();
}
