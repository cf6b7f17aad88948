/*
 * The decoders, inside: the pieces of a request body that codec.c reads for the per-server
 * decoders of codec_mds.c and codec_ost.c.
 */
#ifndef LOOM_PROTO_CODEC_IMPL_H
#define LOOM_PROTO_CODEC_IMPL_H

#include "proto/codec.h"

/* codec.c */
void lw_rd_cred(struct lw_rd *r, struct loom_cred *out);
void lw_rd_layout_req(struct lw_rd *r, struct lw_layout *out);

#endif
