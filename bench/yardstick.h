/*
 * What the FUSE yardsticks (openfloor.c, nullfs.c) share: a session served in loom-mount's loop
 * (src/fuse/main.c: the same threads, no cloned descriptors) until it is unmounted. Include after
 * <fuse_lowlevel.h>. 0 when served to the end, 1 otherwise.
 */
#ifndef LOOM_BENCH_YARDSTICK_H
#define LOOM_BENCH_YARDSTICK_H

static int yardstick_serve(struct fuse_args *args, const struct fuse_lowlevel_ops *ops, size_t size,
			   const char *mountpoint)
{
	struct fuse_session *se = fuse_session_new(args, ops, size, NULL);
	struct fuse_loop_config *cfg;
	int rc = 1;

	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) == 0) {
		if (fuse_session_mount(se, mountpoint) == 0) {
			cfg = fuse_loop_cfg_create();
			if (cfg) {
				fuse_loop_cfg_set_max_threads(cfg, 16);
				fuse_loop_cfg_set_clone_fd(cfg, 0);
				rc = fuse_session_loop_mt(se, cfg) ? 1 : 0;
				fuse_loop_cfg_destroy(cfg);
			}
			fuse_session_unmount(se);
		}
		fuse_remove_signal_handlers(se);
	}
	fuse_session_destroy(se);
	return rc;
}

#endif
