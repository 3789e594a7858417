#!/usr/bin/env python3
"""Walk the successor pointers of every live node (cfsctl status --json
files) and print the cycles they form: "CYCLES SIZE1,SIZE2,..." and, on
further lines, a cycle each as short IDs. A node whose successor is not
among the reports ends its walk (counted as a cycle of its own walk)."""
import json
import sys


def main(paths):
    succ = {}
    for p in paths:
        try:
            d = json.load(open(p))
        except (OSError, ValueError):
            continue
        for v in d["ring"]["vnodes"]:
            s = v["succs"][0]["id"] if v["succs"] else v["id"]
            succ[v["id"]] = s
    seen, cycles = set(), []
    for start in sorted(succ):
        if start in seen:
            continue
        path, at = [], start
        while at in succ and at not in path and at not in seen:
            path.append(at)
            at = succ[at]
        seen.update(path)
        if at in path:
            cycles.append(path[path.index(at):])
    sizes = sorted((len(c) for c in cycles), reverse=True)
    print(len(cycles), ",".join(str(s) for s in sizes))
    for c in cycles:
        print(" ".join(x[:8] for x in c))


if __name__ == "__main__":
    main(sys.argv[1:])
