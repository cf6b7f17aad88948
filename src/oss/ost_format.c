/*
 * An OST on disk (see ost_format.h): making a new one, its ost.conf, its objects' names and
 * their user.loom.fid tags. Pure formatting and parsing but for ost_format and the two file
 * calls of ost_conf_read/_write: no OSS state, so that `loom fsck` links it alone.
 */
#include "oss/ost_format.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"

/* A decimal number as printf's %u writes it (digits only, no leading zero but for 0 itself), at
 * most max. */
static int parse_decimal(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20 || (s[0] == '0' && n > 1))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)((unsigned char)s[i] - '0');
		if (d > 9 || v > (max - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* What is wrong with the n bytes of s as a value of at most max characters, or NULL. */
static const char *text_problem(const char *s, size_t n, size_t max)
{
	if (n == 0)
		return "is empty";
	if (n > max)
		return "is too long";
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return "holds a control character";
	return NULL;
}

/* ---- ost.conf ---- */

static int conf_check(const struct ost_conf *c, char *why, size_t cap)
{
	const char *p;

	p = text_problem(c->fsname, strnlen(c->fsname, sizeof(c->fsname)), LOOM_FSNAME_MAX);
	if (p)
		return refuse_why(why, cap, "fsname %s (1 to %d characters)", p, LOOM_FSNAME_MAX);
	p = text_problem(c->uuid, strnlen(c->uuid, sizeof(c->uuid)), OST_UUID_MAX);
	if (p)
		return refuse_why(why, cap, "uuid %s (1 to %d characters)", p, OST_UUID_MAX);
	return 0;
}

int ost_conf_parse(const char *buf, size_t len, struct ost_conf *conf, char *why, size_t why_cap)
{
	struct ost_conf c = { .idx = OST_IDX_NONE };
	bool has_fsname = false, has_uuid = false, has_idx = false, has_replace = false, has_lost = false;
	unsigned lineno = 0;
	size_t pos = 0;

	if (len > OST_CONF_MAX)
		return refuse_why(why, why_cap, "longer than %d bytes", OST_CONF_MAX);
	if (memchr(buf, '\0', len))
		return refuse_why(why, why_cap, "holds a NUL byte");
	while (pos < len) {
		const char *line = buf + pos, *nl = memchr(line, '\n', len - pos), *eq, *val;
		size_t n = nl ? (size_t)(nl - line) : len - pos, klen, vlen;
		char *dst = NULL;
		size_t max = 0;
		bool *seen = NULL;

		pos += n + (nl != NULL);
		lineno++;
		if (n == 0)
			continue;
		eq = memchr(line, '=', n);
		if (!eq || eq == line)
			return refuse_why(why, why_cap, "line %u is not key=value", lineno);
		klen = (size_t)(eq - line);
		val = eq + 1;
		vlen = n - klen - 1;
		if (klen == 6 && !memcmp(line, "fsname", 6)) {
			dst = c.fsname;
			max = LOOM_FSNAME_MAX;
			seen = &has_fsname;
		} else if (klen == 4 && !memcmp(line, "uuid", 4)) {
			dst = c.uuid;
			max = OST_UUID_MAX;
			seen = &has_uuid;
		} else if (klen == 5 && !memcmp(line, "index", 5)) {
			seen = &has_idx;
		} else if (klen == 7 && !memcmp(line, "replace", 7)) {
			seen = &has_replace;
		} else if (klen == 10 && !memcmp(line, "lost_below", 10)) {
			seen = &has_lost;
		} else {
			continue; /* a key of a later version */
		}
		if (*seen)
			return refuse_why(why, why_cap, "line %u: %.*s given twice", lineno, (int)klen, line);
		*seen = true;
		if (dst) {
			const char *p = text_problem(val, vlen, max);
			if (p)
				return refuse_why(why, why_cap, "line %u: %.*s %s (1 to %zu characters)", lineno,
					   (int)klen, line, p, max);
			memcpy(dst, val, vlen);
			dst[vlen] = '\0';
		} else if (seen == &has_replace) {
			if (vlen != 3 || memcmp(val, "yes", 3))
				return refuse_why(why, why_cap, "line %u: replace is not yes", lineno);
			c.replace = true;
		} else if (seen == &has_lost) {
			if (parse_decimal(val, vlen, UINT64_MAX, &c.lost_below))
				return refuse_why(why, why_cap, "line %u: lost_below is not a number", lineno);
		} else {
			uint64_t v;
			if (parse_decimal(val, vlen, OST_IDX_NONE - 1, &v))
				return refuse_why(why, why_cap, "line %u: index is not a number below %u", lineno,
					   OST_IDX_NONE);
			c.idx = (uint32_t)v;
		}
	}
	if (!has_fsname || !has_uuid)
		return refuse_why(why, why_cap, "no %s", has_fsname ? "uuid" : "fsname");
	if (c.replace && c.idx == OST_IDX_NONE)
		return refuse_why(why, why_cap, "replace without an index");
	*conf = c;
	return 0;
}

int ost_conf_format(const struct ost_conf *conf, char *buf, size_t cap, size_t *len)
{
	int n, m = 0, rc = conf_check(conf, NULL, 0);

	if (rc)
		return rc;
	if (conf->replace && conf->idx == OST_IDX_NONE)
		return -EINVAL;
	if (conf->idx == OST_IDX_NONE)
		n = snprintf(buf, cap, "fsname=%s\nuuid=%s\n", conf->fsname, conf->uuid);
	else
		n = snprintf(buf, cap, "fsname=%s\nuuid=%s\nindex=%" PRIu32 "\n", conf->fsname,
			     conf->uuid, conf->idx);
	if (n < 0 || (size_t)n >= cap)
		return -ERANGE;
	if (conf->replace)
		m = snprintf(buf + n, cap - (size_t)n, "replace=yes\n");
	else if (conf->lost_below)
		m = snprintf(buf + n, cap - (size_t)n, "lost_below=%" PRIu64 "\n", conf->lost_below);
	if (m < 0 || (size_t)m >= cap - (size_t)n)
		return -ERANGE;
	*len = (size_t)(n + m);
	return 0;
}

int ost_conf_read(const char *dir, struct ost_conf *conf, char *why, size_t why_cap)
{
	char path[PATH_MAX], *buf;
	size_t len;
	int rc;

	if (snprintf(path, sizeof(path), "%s/" OST_CONF_FILE, dir) >= (int)sizeof(path))
		rc = -ENAMETOOLONG;
	else
		rc = file_read_all(path, &buf, &len);
	if (rc == -EFBIG)
		return refuse_why(why, why_cap, "longer than %d bytes", OST_CONF_MAX);
	if (rc) {
		if (why && why_cap)
			snprintf(why, why_cap, "%s", strerror(-rc));
		return rc;
	}
	rc = ost_conf_parse(buf, len, conf, why, why_cap);
	free(buf);
	return rc;
}

int ost_conf_write(const char *dir, const struct ost_conf *conf)
{
	char path[PATH_MAX], buf[OST_CONF_MAX];
	size_t len;
	int rc;

	if (snprintf(path, sizeof(path), "%s/" OST_CONF_FILE, dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	rc = ost_conf_format(conf, buf, sizeof(buf), &len);
	if (rc == 0)
		rc = file_write_atomic(path, buf, len);
	return rc;
}

int ost_format(const char *dir, const char *fsname, uint32_t idx, bool replace)
{
	struct ost_conf c = { .idx = idx, .replace = replace };
	char path[PATH_MAX];
	uint8_t r[16];
	struct stat st;
	int rc;

	if (text_problem(fsname, strlen(fsname), LOOM_FSNAME_MAX) || (replace && idx == OST_IDX_NONE))
		return -EINVAL; /* before anything is made */
	memcpy(c.fsname, fsname, strlen(fsname) + 1);
	if (snprintf(path, sizeof(path), "%s/" OST_CONF_FILE, dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	if (stat(path, &st) == 0)
		return -EEXIST;
	rc = mkdir_p(dir, 0755);
	if (rc)
		return rc;
	for (int i = 0; i < OST_NDIRS; i++) {
		snprintf(path, sizeof(path), "%s/" OST_ODIR_FMT, dir, i);
		rc = mkdir_p(path, 0755);
		if (rc)
			return rc;
	}
	rc = random_bytes(r, sizeof(r));
	if (rc)
		return rc;
	snprintf(c.uuid, sizeof(c.uuid), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
		 r[14], r[15]);
	return ost_conf_write(dir, &c);
}

/* ---- objects' names ---- */

void ost_obj_name(uint64_t objid, char *buf, size_t cap)
{
	snprintf(buf, cap, "%" PRIx64, objid);
}

void ost_csum_name(uint64_t objid, char *buf, size_t cap)
{
	snprintf(buf, cap, "%" PRIx64 OST_CSUM_SUFFIX, objid);
}

enum ost_name_kind ost_name_parse(const char *name, unsigned dir, uint64_t *objid)
{
	size_t n = strspn(name, "0123456789abcdefABCDEF");
	uint64_t v = 0;

	if (n == 0 || name[n])
		return OST_NAME_OTHER;
	if (n > 16 || name[0] == '0')
		return OST_NAME_STRAY; /* too big, or not as ost_obj_name writes it (0 is no id) */
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (c >= 'A' && c <= 'F')
			return OST_NAME_STRAY;
		v = v << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
	}
	if (ost_obj_dir(v) != dir)
		return OST_NAME_STRAY;
	*objid = v;
	return OST_NAME_OBJECT;
}

/* ---- user.loom.fid ---- */

size_t ost_fid_format(uint64_t ino, uint32_t stripe, char buf[OST_FID_TAG_MAX])
{
	return (size_t)snprintf(buf, OST_FID_TAG_MAX, "%" PRIu64 ":%" PRIu32, ino, stripe);
}

int ost_fid_parse(const void *buf, size_t len, uint64_t *ino, uint32_t *stripe)
{
	const char *s = buf, *colon = len ? memchr(s, ':', len) : NULL;
	uint64_t i, k;

	if (!colon || parse_decimal(s, (size_t)(colon - s), UINT64_MAX, &i) ||
	    parse_decimal(colon + 1, len - (size_t)(colon - s) - 1, UINT32_MAX, &k))
		return -EINVAL;
	*ino = i;
	*stripe = (uint32_t)k;
	return 0;
}
