"""Saves checkpoint 1 of PATH in the foreground, then checkpoint 2 in the background, prints
"copied" once save() returned, and sleeps: the test kills it with SIGKILL somewhere in the write.

    ckpt_kill.py PATH MIB
"""
import sys
import time

import torch

import loom.torch as lt

path, mib = sys.argv[1], int(sys.argv[2])
n = (mib << 20) // 4
lt.save({"version": 1, "w": torch.full((n,), 1.0)}, path)
print("saved", flush=True)
lt.save({"version": 2, "w": torch.full((n,), 2.0)}, path, background=True)
print("copied", flush=True)
time.sleep(60)
