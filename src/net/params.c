#include "net/params.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool param_matches(const struct param_target *t, const struct param_def *d, const char *pattern)
{
	char full[192];

	snprintf(full, sizeof(full), "%s.%s", t->prefix, d->name);
	return fnmatch(pattern, full, 0) == 0;
}

void params_get(const struct param_target *t, size_t nt, const char *pattern, struct textbuf *tb,
		uint32_t *matched)
{
	*matched = 0;
	for (size_t i = 0; i < nt; i++)
		for (size_t k = 0; k < t[i].ndefs; k++) {
			const struct param_def *d = &t[i].defs[k];
			struct textbuf v = TEXTBUF_INIT;

			if (!param_matches(&t[i], d, pattern))
				continue;
			(*matched)++;
			d->get(t[i].ctx, t[i].target, &v);
			if (v.err) {
				tb->err = v.err;
				tb_free(&v);
				return;
			}
			/* As lctl: one line after the '=', more below it. */
			if (d->block || (v.len && memchr(v.buf, '\n', v.len) != v.buf + v.len - 1))
				tb_printf(tb, "%s.%s=\n", t[i].prefix, d->name);
			else
				tb_printf(tb, "%s.%s=", t[i].prefix, d->name);
			if (v.len)
				tb_append(tb, v.buf, v.len);
			if (!v.len || v.buf[v.len - 1] != '\n')
				tb_append(tb, "\n", 1);
			tb_free(&v);
		}
}

int params_set(const struct param_target *t, size_t nt, const char *pattern, const char *value,
	       uint32_t *matched)
{
	int rc = 0;

	/* All or nothing: every match checked before any is set. */
	*matched = 0;
	for (size_t i = 0; i < nt && rc == 0; i++)
		for (size_t k = 0; k < t[i].ndefs && rc == 0; k++) {
			const struct param_def *d = &t[i].defs[k];

			if (!param_matches(&t[i], d, pattern))
				continue;
			(*matched)++;
			if (!d->check || !d->set)
				rc = -EACCES;
			else
				rc = d->check(t[i].ctx, t[i].target, value);
		}
	if (rc)
		return rc;
	if (!*matched)
		return -ENOENT;
	for (size_t i = 0; i < nt; i++)
		for (size_t k = 0; k < t[i].ndefs; k++)
			if (param_matches(&t[i], &t[i].defs[k], pattern))
				t[i].defs[k].set(t[i].ctx, t[i].target, value);
	return 0;
}
