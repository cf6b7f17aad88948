"""A long-lived checkpoint reader (an evaluator on another node): for each path read from stdin,
torch.load it and answer one JSON line: {"step": N, "same": true|false} (whether the state is
make_state(N) of test_torch) or {"error": "..."}."""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_torch  # noqa: E402


def main():
    for line in sys.stdin:
        path = line.rstrip("\n")
        try:
            s = torch.load(path)
            out = {"step": s["step"], "same": test_torch.same_state(s, test_torch.make_state(s["step"]))}
        except Exception as e:  # noqa: BLE001 - reported to the test
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
