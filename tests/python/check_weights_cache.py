#!/usr/bin/env python3
"""Checks ``export_fx.py --weights-cache``.

    check_weights_cache.py WORK_DIR

Exports tests.python.small_model:SmallNet at the torch and the aten level into
WORK_DIR with one cache folder, then checks that every weight file of both
exports is a hard link to the cache file named by its bytes' SHA-256 (so the
two levels' equal weights are stored once), that the cache holds only those
files, and that exporting again without the cache into the same folder writes
new files instead of writing through the links (the cache keeps its bytes).
Prints "ok" and exits 0, or prints each failure and exits 1.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXPORT = os.path.join(ROOT, "tools", "export_fx.py")


def export(out, level, cache):
    cmd = [sys.executable, EXPORT, "tests.python.small_model:SmallNet", "--input-shape", "2,3,8,8", "--level", level,
           "--seed", "0", "--out", out]
    if cache:
        cmd += ["--weights-cache", cache]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def weight_files(folder):
    with open(os.path.join(folder, "graph.json")) as f:
        return [os.path.join(folder, w["file"]) for w in json.load(f)["weights"].values()]


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    work = sys.argv[1]
    shutil.rmtree(work, ignore_errors=True)
    cache = os.path.join(work, "cache")
    levels = {level: os.path.join(work, level) for level in ("torch", "aten")}
    for level, out in levels.items():
        export(out, level, cache)
    bad = []
    linked = set()
    for level, out in levels.items():
        files = weight_files(out)
        if not files:
            bad.append("%s: no weights" % level)
        for path in files:
            kept = os.path.join(cache, sha(path) + ".npy")
            if not os.path.exists(kept) or not os.path.samefile(path, kept):
                bad.append("%s is not a hard link to %s" % (path, kept))
            linked.add(os.path.basename(kept))
    held = set(os.listdir(cache))
    if held != linked:
        bad.append("the cache holds %s besides the linked files, lacks %s" % (sorted(held - linked), sorted(linked - held)))
    if len(held) >= sum(len(weight_files(out)) for out in levels.values()):
        bad.append("the two levels share no weight file (%d cached)" % len(held))
    before = {name: sha(os.path.join(cache, name)) for name in held}
    export(levels["aten"], "aten", None)
    for path in weight_files(levels["aten"]):
        if os.stat(path).st_nlink != 1:
            bad.append("%s is still linked after an export without the cache" % path)
    for name, digest in before.items():
        if sha(os.path.join(cache, name)) != digest or name[:-len(".npy")] != digest:
            bad.append("cache file %s changed" % name)
    for b in bad:
        print(b)
    if bad:
        return 1
    print("ok: %d weight files in two exports, %d in the cache" % (sum(len(weight_files(o)) for o in levels.values()), len(held)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
