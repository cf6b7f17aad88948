/*
 * A growable text buffer for what servers render (statistics, parameters, metrics): append with
 * printf formats, and check once at the end whether memory ran out on the way.
 */
#ifndef LOOM_COMMON_TEXTBUF_H
#define LOOM_COMMON_TEXTBUF_H

#include <stddef.h>

struct textbuf {
	char *buf;   /* NUL-terminated once anything was appended; NULL before */
	size_t len;  /* bytes, without the NUL */
	size_t cap;
	int err;     /* 0, or -ENOMEM once an append failed (later appends do nothing) */
};

#define TEXTBUF_INIT { 0 }

/* Appends; on failure sets tb->err and leaves the text as it was before this call. */
void tb_printf(struct textbuf *tb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tb_append(struct textbuf *tb, const char *s, size_t n);
/* Hands the text over (*out, *len; the caller frees *out): 0, or tb->err (freed then). A buffer
 * nothing was appended to gives an empty string. */
int tb_take(struct textbuf *tb, char **out, size_t *len);
void tb_free(struct textbuf *tb);

#endif
