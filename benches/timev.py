#!/usr/bin/env python3
"""One raw-run row from `/usr/bin/time -v -o FILE` output, for the bench scripts.

    timev.py FILE COLUMNS LABEL...

prints the labels, then the COLUMNS (comma-separated, in that order) of
wall (seconds, 3 decimals), user, sys (seconds), rss (peak, KiB), read
(bytes read from storage) and exit (the exit status), tab-separated.
"""
import sys

path, cols, labels = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
v = {}
for line in open(path):
    k, _, val = line.strip().rpartition(": ")
    v[k] = val
wall = 0.0
for p in v["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":"):
    wall = wall * 60 + float(p)
get = {
    "wall": lambda: f"{wall:.3f}",
    "user": lambda: v["User time (seconds)"],
    "sys": lambda: v["System time (seconds)"],
    "rss": lambda: v["Maximum resident set size (kbytes)"],
    "read": lambda: str(int(v["File system inputs"]) * 512),
    "exit": lambda: v.get("Exit status", "?"),
}
print("\t".join(labels + [get[c]() for c in cols]))
