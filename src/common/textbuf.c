#include "common/textbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and a NUL. */
static int tb_reserve(struct textbuf *tb, size_t n)
{
	size_t cap;
	char *p;

	if (tb->err)
		return tb->err;
	if (tb->len + n + 1 <= tb->cap)
		return 0;
	cap = tb->cap ? tb->cap : 256;
	while (cap < tb->len + n + 1)
		cap *= 2;
	p = realloc(tb->buf, cap);
	if (!p) {
		tb->err = -ENOMEM;
		return tb->err;
	}
	tb->buf = p;
	tb->cap = cap;
	return 0;
}

void tb_append(struct textbuf *tb, const char *s, size_t n)
{
	if (tb_reserve(tb, n))
		return;
	memcpy(tb->buf + tb->len, s, n);
	tb->len += n;
	tb->buf[tb->len] = '\0';
}

void tb_printf(struct textbuf *tb, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (tb_reserve(tb, 128))
		return;
	va_start(ap, fmt);
	n = vsnprintf(tb->buf + tb->len, tb->cap - tb->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		tb->buf[tb->len] = '\0';
		return;
	}
	if ((size_t)n >= tb->cap - tb->len) {
		tb->buf[tb->len] = '\0';
		if (tb_reserve(tb, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(tb->buf + tb->len, tb->cap - tb->len, fmt, ap);
		va_end(ap);
	}
	tb->len += (size_t)n;
}

int tb_take(struct textbuf *tb, char **out, size_t *len)
{
	if (!tb->err && !tb->buf && tb_reserve(tb, 0) == 0)
		tb->buf[0] = '\0';
	if (tb->err) {
		int err = tb->err;

		tb_free(tb);
		return err;
	}
	*out = tb->buf;
	*len = tb->len;
	tb->buf = NULL;
	tb->len = tb->cap = 0;
	return 0;
}

void tb_free(struct textbuf *tb)
{
	free(tb->buf);
	tb->buf = NULL;
	tb->len = tb->cap = 0;
	tb->err = 0;
}
