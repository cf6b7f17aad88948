/* loom_get_param, loom_set_param: GET_PARAM / SET_PARAM to the MDS and to every OST's server. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/textbuf.h"

/* One server's answer to GET_PARAM into tb (all of it: asked again with room enough if cut). */
static int param_get_one(struct rpc_conn *c, const char *pattern, struct textbuf *text, uint32_t *matched)
{
	struct lw_param_req req = { .cap = 1u << 20 };
	struct lw_param_rep rep;
	int rc;

	snprintf(req.name, sizeof(req.name), "%s", pattern);
	for (int tries = 0; tries < 3; tries++) {
		struct rpc_call call;
		struct iovec iov;
		void *buf = malloc(req.cap ? req.cap : 1);

		if (!buf)
			return -ENOMEM;
		iov.iov_base = buf;
		iov.iov_len = req.cap;
		rpc_call_init(&call, LW_OP_GET_PARAM, &req, sizeof(req));
		call.flags = RPC_NOWAIT; /* an administrator asking wants an answer, not a wait */
		call.rbulk = &iov;
		call.rbulk_cnt = 1;
		rc = rpc_call_sync(c, &call);
		if (rc == 0 && call.rbody_len != sizeof(rep))
			rc = -EPROTO;
		if (rc == 0) {
			memcpy(&rep, call.rbody, sizeof(rep));
			if (rep.len != call.rbulk_len || rep.len > rep.total || rep.len > req.cap)
				rc = -EPROTO;
		}
		rpc_call_release(&call);
		if (rc == 0 && rep.len < rep.total && rep.total <= LW_MAX_BULK) {
			free(buf);
			req.cap = rep.total; /* it grew between the two: again */
			continue;
		}
		if (rc == 0) {
			tb_append(text, buf, rep.len);
			*matched += rep.matched;
		}
		free(buf);
		return rc;
	}
	return -EAGAIN;
}

/* Of an OSS's text, only OST idx's parameters: a server of several OSTs answers for all of them
 * on each OST's connection. A parameter's block starts with a line "ost.FSNAME-OSTxxxx.NAME=". */
static void keep_ost_blocks(const char *text, size_t len, const char *fsname, uint32_t idx,
			    struct textbuf *out)
{
	char mine[64], any[32];
	bool keep = false;
	const char *p = text, *end = text + len;

	snprintf(mine, sizeof(mine), "ost.%s-OST%04x.", fsname, idx);
	snprintf(any, sizeof(any), "ost.%s-OST", fsname);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);

		if (n >= strlen(any) && !strncmp(p, any, strlen(any)))
			keep = n >= strlen(mine) && !strncmp(p, mine, strlen(mine));
		if (keep)
			tb_append(out, p, n);
		p += n;
	}
}

int loom_get_param(loom_fs *fs, const char *pattern, char **out, size_t *len)
{
	struct textbuf text = TEXTBUF_INIT;
	struct loom_target *tg = NULL;
	struct rpc_conn *c;
	uint32_t matched = 0, ntg = 0;
	int first_err = 0, rc;

	if (!pattern || !pattern[0] || strlen(pattern) >= LW_PARAM_NAME_MAX)
		return -EINVAL;
	rc = fs_mds_conn(fs, &c);
	if (rc == 0)
		rc = param_get_one(c, pattern, &text, &matched);
	if (rc && rc != -ENOENT)
		first_err = rc;
	rc = loom_targets(fs, &tg, &ntg);
	if (rc && !first_err)
		first_err = rc;
	for (uint32_t i = 0; rc == 0 && i < ntg; i++) {
		struct textbuf one = TEXTBUF_INIT;
		uint32_t m = 0;
		int orc;

		if (tg[i].kind != LOOM_TGT_OST || (tg[i].flags & LOOM_TGTF_INACTIVE))
			continue;
		orc = fs_ost_conn(fs, tg[i].idx, &c);
		if (orc == 0)
			orc = param_get_one(c, pattern, &one, &m);
		if (orc == 0 && m) {
			size_t before = text.len;

			keep_ost_blocks(one.buf, one.len, fs->fsname, tg[i].idx, &text);
			if (text.len > before)
				matched++;
		} else if (orc && orc != -ENOENT && !first_err) {
			first_err = orc;
		}
		tb_free(&one);
	}
	free(tg);
	if (!matched) {
		tb_free(&text);
		return first_err ? first_err : -ENOENT;
	}
	return tb_take(&text, out, len);
}

/* One server's SET_PARAM: 0 with *matched, or its error. */
static int param_set_one(struct rpc_conn *c, const struct lw_param_req *req, uint32_t *matched)
{
	struct lw_param_rep rep;
	struct rpc_call call;
	int rc;

	rpc_call_init(&call, LW_OP_SET_PARAM, req, sizeof(*req));
	call.flags = RPC_NOWAIT;
	rc = rpc_call_sync(c, &call);
	if (rc == 0 && call.rbody_len != sizeof(rep))
		rc = -EPROTO;
	if (rc == 0) {
		memcpy(&rep, call.rbody, sizeof(rep));
		*matched += rep.matched;
	}
	rpc_call_release(&call);
	return rc;
}

int loom_set_param(loom_fs *fs, const char *pattern, const char *value, uint32_t *matched)
{
	struct lw_param_req req = { 0 };
	struct loom_target *tg = NULL;
	struct rpc_conn *c;
	uint32_t n = 0, ntg = 0, done_ost_servers = 0;
	char (*addrs)[80] = NULL;
	int first_err = 0, rc;

	if (!pattern || !pattern[0] || strlen(pattern) >= sizeof(req.name) || !value ||
	    strlen(value) >= sizeof(req.value))
		return -EINVAL;
	snprintf(req.name, sizeof(req.name), "%s", pattern);
	snprintf(req.value, sizeof(req.value), "%s", value);
	rc = fs_mds_conn(fs, &c);
	if (rc == 0)
		rc = param_set_one(c, &req, &n);
	if (rc && rc != -ENOENT)
		first_err = rc;
	rc = loom_targets(fs, &tg, &ntg);
	if (rc && !first_err)
		first_err = rc;
	if (rc == 0 && ntg && !(addrs = calloc(ntg, sizeof(*addrs))))
		rc = first_err = -ENOMEM;
	/* Once per server: one serving several OSTs sets them all at once. */
	for (uint32_t i = 0; rc == 0 && i < ntg; i++) {
		bool seen = false;
		int orc;

		if (tg[i].kind != LOOM_TGT_OST || (tg[i].flags & LOOM_TGTF_INACTIVE))
			continue;
		for (uint32_t k = 0; k < done_ost_servers && !seen; k++)
			seen = !strcmp(addrs[k], tg[i].addr);
		if (seen)
			continue;
		snprintf(addrs[done_ost_servers++], sizeof(addrs[0]), "%s", tg[i].addr);
		orc = fs_ost_conn(fs, tg[i].idx, &c);
		if (orc == 0)
			orc = param_set_one(c, &req, &n);
		if (orc && orc != -ENOENT && !first_err)
			first_err = orc;
	}
	free(addrs);
	free(tg);
	if (matched)
		*matched = n;
	if (first_err)
		return first_err;
	return n ? 0 : -ENOENT;
}
