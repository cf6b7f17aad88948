"""Checkpoints that don't stall training: loom.torch.save(obj, path, background=True).

The caller waits only for a copy of the state in host memory (tensors cloned to the CPU, the
containers around them rebuilt); a thread of this module serializes the copy with torch.save,
writes it to a temporary name beside path, fsyncs it, renames it over path and commits the
rename, so path is the old checkpoint or the new one, whole, never a part. An error is kept and
raised by wait(), or by the next save (a checkpoint that failed is never silent). One save is in
flight at a time per process: a new one waits for the one before, so at most two copies of the
state are held. The program's exit waits for a save in flight (its thread is not a daemon).
"""

import collections
import copy
import os
import threading

import torch

from ._storage import storage_for

_lock = threading.Lock()
_pending = None          # the save in flight, or the last one, not waited for
_failed = None           # the error of a save nobody has been told of yet
_kept_storage = None     # the last save's: its connection lives on for the next save


def host_copy(obj, memo=None):
    """obj with every tensor copied to host memory and its containers rebuilt: what the training
    loop changes in place afterwards cannot reach the copy. Tensors that share a storage (tied
    weights, views) share one copy of it, as torch.save keeps them."""
    memo = {} if memo is None else memo
    if isinstance(obj, torch.Tensor):
        return _tensor_copy(obj, memo)
    if isinstance(obj, dict):
        out = copy.copy(obj) if type(obj) not in (dict, collections.OrderedDict) else type(obj)()
        for k, v in obj.items():
            out[k] = host_copy(v, memo)
        return out
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):   # a namedtuple
        return type(obj)(*(host_copy(v, memo) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(host_copy(v, memo) for v in obj)
    if isinstance(obj, (int, float, complex, str, bytes, bool, type(None))):
        return obj
    return copy.deepcopy(obj)


def _tensor_copy(t, memo):
    if t.layout != torch.strided or t.is_quantized:
        return t.detach().to("cpu", copy=True)
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    key = (storage.data_ptr(), str(t.device), t.dtype)
    host = memo.get(key)
    if host is None:
        host = memo[key] = storage.cpu() if t.device.type != "cpu" else storage.clone()
    out = torch.empty(0, dtype=t.dtype)
    out.set_(host, t.storage_offset(), t.size(), t.stride())
    if isinstance(t, torch.nn.Parameter):
        return torch.nn.Parameter(out, requires_grad=t.requires_grad)
    return out


class PendingSave:
    """A checkpoint being written behind. wait() returns once it is in place and durable, or
    raises what went wrong."""

    def __init__(self, path):
        self.path = path
        self._done = threading.Event()
        self._error = None
        self._reported = False
        self.thread = None

    def done(self):
        return self._done.is_set()

    def wait(self, timeout=None):
        """Waits for the save, and returns its path; raises its error if it failed (and the next
        save then does not raise it again)."""
        global _failed
        if not self._done.wait(timeout):
            raise TimeoutError("the checkpoint %s is still being written" % self.path)
        if self._error is not None:
            with _lock:
                self._reported = True
                if _failed is self:
                    _failed = None
            raise self._error
        return self.path


def _temporary(path):
    d, name = os.path.split(path)
    return os.path.join(d, ".%s.tmp-%d-%d" % (name, os.getpid(), threading.get_ident()))


def put_in_place(storage, path, write):
    """write(f) to a temporary name beside path, fsync, rename over path, commit the rename: path
    is the old file or the new one, whole."""
    tmp = _temporary(path)
    try:
        with storage.open(tmp, "wb") as f:
            write(f)
            f.flush()
            if hasattr(f, "fsync"):
                f.fsync()                 # loom.File: the bytes on the OSTs, the name at the MDS
            else:
                os.fsync(f.fileno())
        storage.rename(tmp, path)
        storage.sync_dir(os.path.dirname(path) or ".")
    except BaseException:
        try:
            storage.remove(tmp)
        except OSError:
            pass
        raise


def _write(storage, state, path):
    put_in_place(storage, path, lambda f: torch.save(state, f))


def _run(pending, storage, state):
    global _failed
    try:
        _write(storage, state, pending.path)
    except BaseException as e:  # noqa: BLE001 - kept for wait() and the next save
        pending._error = e
        with _lock:
            _failed = pending
    finally:
        pending._done.set()


def _raise_unreported():
    """The error of an earlier background save nobody was told of, raised once."""
    global _failed
    with _lock:
        failed, _failed = _failed, None
        if failed is None or failed._reported:
            return
        failed._reported = True
    raise RuntimeError("the background checkpoint save to %s failed: %s"
                       % (failed.path, failed._error)) from failed._error


def save(obj, path, *, background=False, fs=None, native=None):
    """torch.save(obj, path), made durable and put in place whole (a temporary name, fsync,
    rename). background=True returns a PendingSave once obj is copied to host memory, and
    writes behind. Raises the error of an earlier background save not yet reported."""
    global _pending, _kept_storage
    path = os.fspath(path)
    previous = _pending
    if previous is not None:
        previous._done.wait()             # one in flight: at most two copies of the state
    _raise_unreported()
    storage = storage_for(os.path.dirname(os.path.abspath(path)), native=native, fs=fs)
    _kept_storage = storage
    if not background:
        _write(storage, obj, path)
        return None
    pending = PendingSave(path)
    state = host_copy(obj)
    pending.thread = threading.Thread(target=_run, args=(pending, storage, state),
                                      name="loom-checkpoint", daemon=False)
    _pending = pending
    pending.thread.start()
    return pending


def wait():
    """Waits for the background save in flight, if any; raises an error not yet reported."""
    p = _pending
    if p is not None:
        p._done.wait()
    _raise_unreported()
