/*
 * crash_writer: a client that dies between write and close, for the tests of `loom fsck`
 * (tests/integration/test_fsck.py).
 *
 *   crash_writer MDS_ADDR LOCAL_FILE PATH
 *
 * Creates PATH (its layout from its directory), writes LOCAL_FILE's bytes to it through libloom,
 * reads one byte back (which waits until the writes that went behind are acknowledged by their
 * OSSs: a client reads what it wrote), prints "written", and waits to be killed: it never closes
 * nor syncs, so the MDS never learns the file's size. The key comes from $LOOM_KEY_FILE.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom/loom.h"

int main(int argc, char **argv)
{
	static char buf[1 << 20];
	loom_fs *fs;
	loom_file *f;
	off_t off = 0;
	ssize_t n;
	int fd, rc;

	if (argc != 4) {
		fprintf(stderr, "usage: crash_writer MDS_ADDR LOCAL_FILE PATH\n");
		return 2;
	}
	fd = open(argv[2], O_RDONLY);
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	rc = loom_connect(argv[1], NULL, &fs);
	if (rc == 0)
		rc = loom_create(fs, argv[3], O_RDWR | O_CREAT | O_EXCL, 0644, NULL, &f);
	if (rc) {
		fprintf(stderr, "crash_writer: %s: %s\n", argv[3], strerror(-rc));
		return 1;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		ssize_t w = loom_pwrite(f, buf, (size_t)n, off);
		if (w != n) {
			fprintf(stderr, "crash_writer: write: %s\n", strerror(w < 0 ? (int)-w : EIO));
			return 1;
		}
		off += n;
	}
	if (off > 0 && loom_pread(f, buf, 1, 0) != 1) {
		fprintf(stderr, "crash_writer: reading back: failed\n");
		return 1;
	}
	printf("written\n");
	fflush(stdout);
	for (;;)
		pause();
}
