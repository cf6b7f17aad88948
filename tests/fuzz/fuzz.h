/*
 * Shared pieces of the libFuzzer drivers: a property check that aborts (libFuzzer keeps the input
 * that made it fire), a reader over the fuzz input, and reference models written from wire.h
 * alone (crc32c from its polynomial, the header rules), so that a driver can compare what Loom's
 * decoders say with what the protocol says rather than with themselves.
 */
#ifndef LOOM_FUZZ_H
#define LOOM_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/wire.h"

/* libFuzzer's entry points (declared here for -Wmissing-prototypes). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A property every input must keep. Not assert(): it must fire in every build type. */
#define FUZZ_CHECK(cond)                                                                  \
	do {                                                                              \
		if (!(cond))                                                              \
			fuzz_fail(__FILE__, __LINE__, #cond);                             \
	} while (0)
_Noreturn void fuzz_fail(const char *file, int line, const char *what);

/* Silences Loom's log lines (a closed connection per input would flood the output). */
void fuzz_quiet(void);

/* Reads the fuzz input front to back; past its end every read gives zeros. */
struct fuzz_in {
	const uint8_t *p;
	size_t n;
};
uint8_t fin_u8(struct fuzz_in *in);
uint16_t fin_u16(struct fuzz_in *in);
uint32_t fin_u32(struct fuzz_in *in);

/* splitmix64: the drivers' only source of "randomness", seeded from the input. */
uint64_t fuzz_rand(uint64_t *state);

/* crc32c from its polynomial alone: checks ISA-L's (common/crc.c) and every checksum on the wire. */
uint32_t ref_crc32c(uint32_t crc, const void *buf, size_t len);

/* A frame header read field by field from its 40 little-endian bytes (wire.h's offsets). */
struct ref_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t opcode;
	uint32_t flags;
	int32_t status;
	uint64_t req_id;
	uint32_t body_len;
	uint32_t bulk_len;
	uint32_t bulk_crc;
	uint32_t hdr_crc;
};
#define REF_HDR_LEN 40
void ref_hdr_parse(const uint8_t *raw, struct ref_hdr *h);
/* wire.h's rules for a received header: 0 or -EPROTO. */
int ref_hdr_check(const struct ref_hdr *h);
/* crc32c of the 40 header bytes with hdr_crc zeroed, then of the body. */
uint32_t ref_hdr_crc(const uint8_t *raw, const void *body, size_t body_len);
/* The same two with ISA-L's crc32c (common/crc.c), which fuzz_hdr checks against ref_crc32c:
 * the stream drivers checksum megabytes per input. */
uint32_t fast_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t fast_hdr_crc(const uint8_t *raw, const void *body, size_t body_len);
/* What a status becomes on the wire, and back (codec.h's rules, restated). */
int32_t ref_errno_to_wire(int err);
int ref_errno_from_wire(int32_t status);

/* A growable byte buffer. */
struct fbuf {
	uint8_t *p;
	size_t len;
	size_t cap;
};
void fbuf_put(struct fbuf *b, const void *p, size_t n);
void fbuf_free(struct fbuf *b);

/*
 * Turns fuzz input into a stream of frames for the frame parsers. Random bytes almost never carry
 * a right crc32c, so a fuzzer would spend its time on the first checksum; with FUZZ_FIX_CRC the
 * checksums of every frame whose bytes are all there are computed (except a hdr_crc or bulk_crc
 * field that holds 0xFFFFFFFF, which is left alone: a wrong checksum the fuzzer can still ask
 * for). With FUZZ_SYNTH_BULK the input holds headers and bodies only, and each bulk is made up
 * (up to synth_cap bytes in all), so that bulks larger than any input reach the parsers.
 */
#define FUZZ_FIX_CRC    0x1u
#define FUZZ_SYNTH_BULK 0x2u
void fuzz_frames(const uint8_t *in, size_t n, unsigned mode, size_t synth_cap, struct fbuf *out);

#endif
