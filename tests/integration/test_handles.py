"""Open handles across MDS restarts, on the wire: a handle a client holds from before a restart
(one it did not open again: its open was answered as the MDS went down) never names another
file's handle in the new run, so reports through it are not refused as someone else's."""

import os

import loomwire as w

ROOT = w.ROOT_INO
S_IFREG = 0o100000
C = w.cred()
OP = {name: row["value"] for name, row in w.read_ops_def().items()}


def create_open(c, name, req_id):
    """(ino, handle) of a file made and opened by c in one MDS_CREATE (LW_CR_OPEN)."""
    st, rep = c.call(OP["MDS_CREATE"], C + w.CREATE_REQ.pack(ROOT, S_IFREG | 0o644, 0, w.CR_EXCL | w.CR_OPEN,
                                                      w.O_RDWR, len(name)) + name, req_id)
    assert st == 0, "MDS_CREATE of %r answered %d" % (name, st)
    return w.parse_attr(rep)["ino"], w.CREATE_REP.unpack_from(rep)[1]


def size_of(c, ino, req_id):
    st, rep = c.call(OP["MDS_GETATTR"], C + w.ino_req(ino), req_id)
    assert st == 0, "MDS_GETATTR answered %d" % st
    return w.parse_attr(rep)["size"]


def test_a_handle_from_before_an_mds_restart_is_not_another_files_handle(cluster):
    uuid = os.urandom(16)
    with w.Client(cluster.mds_host, cluster.mds_port, uuid) as c:
        before = [create_open(c, b"before%d" % i, 10 + i) for i in range(3)]
        # Committed (the MDS answers creates before their commit; this raw client replays none).
        st, _ = c.call(OP["MDS_SYNC"], w.sync_req(), 20)
        assert st == 0, "MDS_SYNC answered %d" % st
    cluster.kill9("mds")
    cluster.restart()
    # The same client, reconnected: it opens new files, as many as it had before and more.
    with w.Client(cluster.mds_host, cluster.mds_port, uuid) as c:
        after = [create_open(c, b"after%d" % i, 100 + i) for i in range(5)]
        old_handles = {h for _, h in before}
        assert not old_handles & {h for _, h in after}, \
            "the restarted MDS gave out handle numbers of its last run again: %r and %r" % (before, after)
        # A size report through each handle from before the restart: taken on trust, as the new
        # MDS does not know it, and it changes the file it names, not the file a new handle of
        # the same number would name.
        for k, (ino, handle) in enumerate(before):
            st, _ = c.call(OP["MDS_SIZE_UPDATE"], C + w.close_req(ino, handle, w.CL_SIZE | w.CL_DATA, size=1000 + k),
                           200 + k)
            assert st == 0, "a size report through a handle from before the restart answered %d" % st
        assert [size_of(c, ino, 300 + k) for k, (ino, _) in enumerate(before)] == [1000, 1001, 1002]
        assert [size_of(c, ino, 400 + k) for k, (ino, _) in enumerate(after)] == [0] * 5
        # Each close ends its own handle: the files opened in this run close as they should.
        for k, (ino, handle) in enumerate(before + after):
            st, _ = c.call(OP["MDS_CLOSE"], C + w.close_req(ino, handle), 500 + k)
            assert st == 0, "MDS_CLOSE of inode %d answered %d" % (ino, st)
        # A handle of this run, named with the wrong inode, is still refused.
        ino, handle = create_open(c, b"last", 600)
        st, _ = c.call(OP["MDS_SIZE_UPDATE"], C + w.close_req(before[0][0], handle, w.CL_SIZE, size=1), 601)
        assert st == -w.EBADF, "a handle named with another file's inode answered %d, not -EBADF" % st
