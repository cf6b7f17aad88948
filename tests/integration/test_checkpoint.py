"""loom.torch.save: a checkpoint written behind the training loop (background=True) from a copy
of the state, put in place whole (temporary name, fsync, rename), with its error reaching the
caller at wait() or at the next save; on Loom natively, through the mount, and on a local
folder."""

import os
import signal
import subprocess
import time

import pytest

from pyloom import child_env, pylib

pytestmark = pylib

torch = pytest.importorskip("torch")
import loom.torch as lt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def model_state():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(300, 200), torch.nn.ReLU(), torch.nn.Linear(200, 300))
    m[2].weight = torch.nn.Parameter(m[0].weight.t())   # tied (a view of another's storage)
    opt = torch.optim.Adam(m.parameters())
    m(torch.randn(4, 300)).sum().backward()
    opt.step()
    return m, opt


def check_saved(path, snapshot):
    got = torch.load(path)
    assert got["step"] == snapshot["step"] and got["note"] == snapshot["note"]
    for k, v in snapshot["model"].items():
        assert torch.equal(got["model"][k], v), k
    # The tie survives: one storage, as torch.save of the live state would keep it.
    assert got["model"]["2.weight"].data_ptr() == got["model"]["0.weight"].data_ptr()
    assert torch.equal(got["optim"]["state"][0]["exp_avg"], snapshot["optim"]["state"][0]["exp_avg"])
    return got


@pytest.mark.parametrize("where", ["native", "mount", "local"])
def test_a_background_save_holds_the_state_as_it_was_when_save_returned(cluster, tmp_path, where,
                                                                     monkeypatch):
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    if where == "local":
        d = str(tmp_path)
    else:
        d = os.path.join(cluster.mount(), "ckpt")
        os.mkdir(d)
    m, opt = model_state()
    state = {"model": m.state_dict(), "optim": opt.state_dict(), "step": 7, "note": ["a", {"b": 1}]}
    snapshot = {"model": {k: v.clone() for k, v in state["model"].items()}, "step": 7,
                "note": ["a", {"b": 1}],
                "optim": {"state": {0: {"exp_avg": opt.state_dict()["state"][0]["exp_avg"].clone()}}}}
    path = os.path.join(d, "step-7.pt")
    pending = lt.save(state, path, background=True, native=False if where == "mount" else None)
    # The loop goes on at once and changes everything in place: the checkpoint must not see it.
    with torch.no_grad():
        for p in m.parameters():
            p.add_(1.0)
    opt.state_dict()["state"][0]["exp_avg"].add_(5.0)
    state["note"][1]["b"] = 2
    assert pending.wait() == path and pending.done()
    check_saved(path, snapshot)
    assert sorted(os.listdir(d)) == ["step-7.pt"]     # no temporary left beside it
    # A save over it: replaced whole.
    lt.save({"model": {"x": torch.arange(5)}, "step": 8}, path)
    assert torch.equal(torch.load(path)["model"]["x"], torch.arange(5))
    lt.wait()


def test_a_failed_background_save_raises_at_wait_or_at_the_next_save(cluster, monkeypatch):
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    mnt = cluster.mount()
    state = {"w": torch.ones(10)}
    gone = os.path.join(mnt, "no-such-dir", "c.pt")
    pending = lt.save(state, gone, background=True)
    with pytest.raises(FileNotFoundError):
        pending.wait()
    lt.save(state, os.path.join(mnt, "after-wait.pt"))      # told once: not raised again
    pending = lt.save(state, gone, background=True)
    while not pending.done():
        time.sleep(0.01)
    with pytest.raises(RuntimeError, match="the background checkpoint save to %s failed: .*No such "
                       "file or directory" % gone):
        lt.save(state, os.path.join(mnt, "next.pt"), background=True)
    assert not os.path.exists(os.path.join(mnt, "next.pt"))  # the caller was told first
    with pytest.raises(FileNotFoundError):
        pending.wait()                                        # the handle still says it failed
    lt.wait()                                                 # nothing left to report
    assert sorted(os.listdir(mnt)) == ["after-wait.pt"]


def test_a_save_killed_midway_leaves_the_old_checkpoint_or_the_new_one_whole(cluster):
    mnt = cluster.mount()
    path = os.path.join(mnt, "model.pt")
    for delay in (0.0, 0.2, 0.5):
        p = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "pyprograms", "ckpt_kill.py"),
                              path, "48"], stdout=subprocess.PIPE, text=True, env=child_env(cluster))
        assert p.stdout.readline() == "saved\n"
        assert p.stdout.readline() == "copied\n"
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        got = torch.load(path)
        assert got["version"] in (1, 2)
        assert torch.equal(got["w"], torch.full(((48 << 20) // 4,), float(got["version"])))
        for name in os.listdir(mnt):   # a temporary may be left, hidden, never the checkpoint
            assert name == "model.pt" or name.startswith(".model.pt.tmp-"), name
