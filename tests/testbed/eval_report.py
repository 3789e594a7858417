#!/usr/bin/env python3
"""The report of `make eval` / `make eval-quick` (tests/testbed/eval.sh).

    eval_report.py OUT --mode full|quick [--doc DOC.md --png-dir DIR]

OUT holds one folder per experiment, as eval.sh leaves it: RUN.json (the
program's JSON phases, one object a line), RUN.err, RUN.failed (the exit
code, when the program failed) and, for cfs-testbed runs, RUN/ops.csv and
RUN/events.csv. Each paper's figure becomes a section of markdown: what
the paper measured and what was measured here, a table, and a gnuplot PNG.

With --doc the markdown goes to DOC and the PNGs to DIR. Without it (CI)
both go to OUT/report/ and the run must pass the sanity checks: plausibility
bounds on what each experiment produced, never expected values; exit 1
lists what failed. The gnuplot scripts and their data stay in
OUT/report/gnuplot/ either way.
"""
import argparse
import csv
import json
import math
import os
import platform
import re
import subprocess
import sys
import time

PAPER_CFS = "CFS (SOSP 2001)"
K_SUCC = 6          # replicas per block in the failure experiment
HERE = os.path.dirname(os.path.abspath(__file__))
TESTBED_RUNS = ("fig10", "fig12", "fig11", "dhashpp", "opendht", "coded", "avail", "churn", "fig6", "scale")


# ------------------------------------------------------------ numbers

def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def sd(xs):
    if len(xs) < 2:
        return 0.0 if xs else float("nan")
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def quantile(xs, q):
    """Linear interpolation between the closest ranks (numpy's default)."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(xs):
    return quantile(xs, 0.5)


def fmt(x, nd=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{nd}f}"


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------ raw output

class Run:
    """One program run: its JSON phases, stderr, exit marker and CSVs."""

    def __init__(self, out, exp, name):
        self.label = f"{exp}/{name}"
        base = os.path.join(out, exp, name)
        self.exists = os.path.exists(base + ".json")
        self.phases = []
        if self.exists:
            with open(base + ".json", errors="replace") as f:
                for line in f:
                    try:
                        obj = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(obj, dict):
                        self.phases.append(obj)
        self.err = _read(base + ".err")
        self.failed = _read(base + ".failed").strip() if os.path.exists(base + ".failed") else None
        self.ops = _csv(os.path.join(base, "ops.csv"))
        self.events = _csv(os.path.join(base, "events.csv"))

    def phase(self, name, mode=None):
        for p in self.phases:
            if p.get("phase") == name and (mode is None or str(p.get("mode", "")).startswith(mode)):
                return p
        return None

    def trouble(self, judge_failed=True):
        """Why this run cannot be used, or None."""
        if not self.exists:
            return f"{self.label}: missing"
        if judge_failed and self.failed is not None:
            last = self.err.strip().splitlines()[-1:] or [""]
            return f"{self.label}: failed (exit {self.failed}): {last[0][:160]}"
        return None

    def gets(self, ok_only=True):
        return [o for o in self.ops if o["op"] == "get" and (o["status"] == 0 or not ok_only)]


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _csv(path):
    rows = []
    try:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                try:
                    rows.append({k: (v if k in ("op", "event") else float(v)) for k, v in r.items()})
                except (TypeError, ValueError):
                    continue
    except OSError:
        pass
    for r in rows:
        for k in ("status", "node", "alive", "t_ms"):
            if k in r:
                r[k] = int(r[k])
    return rows


# ------------------------------------------------------------ the report

class Report:
    def __init__(self, args):
        self.out = args.out
        self.mode = args.mode
        if args.doc:
            self.doc = args.doc
            self.png_dir = args.png_dir or os.path.join(os.path.dirname(args.doc) or ".", "eval")
        else:
            self.doc = os.path.join(self.out, "report", "EVALUATION.md")
            self.png_dir = os.path.join(self.out, "report")
        self.gp_dir = os.path.join(self.out, "report", "gnuplot")
        for d in (self.png_dir, self.gp_dir, os.path.dirname(self.doc) or "."):
            os.makedirs(d, exist_ok=True)
        self.sections = []      # (anchor, title, markdown)
        self.checks = []        # (name, problems, summary)
        self.accept = []        # lines
        self.term = _terminal()
        self.settings = eval_settings(self.mode)
        self.plot_errors = []
        self.fig9 = {}          # N -> (iterative RPCs, recursive RPCs, KiB per node)

    def run(self, exp, name):
        return Run(self.out, exp, name)

    def runs(self, exp, prefix):
        """The runs of an experiment whose names start with prefix."""
        d = os.path.join(self.out, exp)
        names = sorted(f[:-5] for f in os.listdir(d) if f.endswith(".json")) if os.path.isdir(d) else []
        return [self.run(exp, n) for n in names if n.startswith(prefix)]

    def section(self, anchor, title, body):
        self.sections.append((anchor, title, body))

    def check(self, name, problems, summary):
        self.checks.append((name, problems, summary))

    def plot(self, name, script, data, size="800,500"):
        """Run gnuplot on script (data files named by data's keys, in the
        gnuplot folder) into PNG_DIR/name.png; return its markdown or a note."""
        if not data or not next(iter(data.values())):
            return "*(no data to plot)*\n"
        for fname, rows in data.items():
            with open(os.path.join(self.gp_dir, fname), "w") as f:
                f.writelines(" ".join(_gp(c) for c in r) + "\n" for r in rows)
        png = os.path.abspath(os.path.join(self.png_dir, name + ".png"))
        head = (f"set terminal {self.term} size {size}\nset output '{png}'\n"
                "set grid\nset key top left\nset datafile missing 'NaN'\n")
        gp = os.path.join(self.gp_dir, name + ".gp")
        with open(gp, "w") as f:
            f.write(head + script + "\nunset output\n")
        try:
            p = subprocess.run(["gnuplot", name + ".gp"], cwd=self.gp_dir, capture_output=True,
                               text=True, timeout=60)
            err = p.stderr.strip() if p.returncode else ""
        except (OSError, subprocess.SubprocessError) as e:
            err = str(e)
        if err or not os.path.exists(png):
            self.plot_errors.append(f"{name}.png: gnuplot failed: {err[-300:]}")
            return f"*(plot {name}.png could not be drawn: gnuplot said: {err[-200:]})*\n"
        rel = os.path.relpath(png, os.path.dirname(os.path.abspath(self.doc)))
        return f"![{name}]({rel})\n"


def _gp(c):
    if isinstance(c, str):
        return '"' + c.replace('"', "'") + '"'
    if c is None or (isinstance(c, float) and math.isnan(c)):
        return "NaN"
    return repr(round(c, 6)) if isinstance(c, float) else str(c)


def _terminal():
    try:
        p = subprocess.run(["gnuplot", "-e", "set terminal pngcairo"], capture_output=True,
                           text=True, timeout=20)
        return "pngcairo" if p.returncode == 0 and not p.stderr.strip() else "png"
    except (OSError, subprocess.SubprocessError):
        return "pngcairo"


def eval_settings(mode):
    """eval.sh's settings for the mode (SIZES, KILLS, ...): the runs to expect."""
    m = re.search(r'if \[ "\$MODE" = full \]; then(.*?)\nelse(.*?)\nfi', _read(os.path.join(HERE, "eval.sh")), re.S)
    block = m.group(1 if mode == "full" else 2) if m else ""
    return {k: v.strip('"') for k, v in re.findall(r'(\w+)=("[^"]*"|[^\s;]+)', block)}


def expected_runs(R, exp, prefix, key):
    """The runs eval.sh makes for exp (named prefix + each word of key),
    plus any others found; complain when there are none at all."""
    names = [prefix + w for w in R.settings.get(key, "").split()]
    have = [r.label.split("/", 1)[1] for r in R.runs(exp, prefix)]
    runs = [R.run(exp, n) for n in names + [h for h in have if h not in names]]
    return runs, ([] if runs else [f"{exp}: no runs (and no {key} in eval.sh)"])


def missing_note(troubles):
    if not troubles:
        return ""
    return "**Not usable here:** " + "; ".join(troubles) + ".\n\n"


def caption(text):
    return f"*{text}*\n"


def exp_note(R, exp):
    """OUT/exp/note.txt, as a caption: how runs not made by one whole
    make eval were made (empty when there is none)."""
    text = _read(os.path.join(R.out, exp, "note.txt")).strip()
    return "\n" + caption(text) if text else ""


def shape(verdict, text):
    """The section's verdict: is the figure in the paper's shape, and why
    not where it is not (computed from the runs, not written by hand)."""
    head = {True: "In the paper's shape.", False: "Not in the paper's shape.",
            None: "Not judged (runs missing).", "none": "No paper figure to match."}[verdict]
    return f"\n**Shape.** {head} {text}\n"


# ------------------------------------------------------------ CFS Fig. 9

def sec_fig9(R):
    runs, troubles = expected_runs(R, "fig9", "n", "SIZES")
    runs.sort(key=lambda r: int(r.label.split("/n")[1] or 0))
    probs, rows, data = [], [], {"fig9.dat": []}
    for r in runs:
        t = r.trouble()
        b = r.phase("build")
        if t or not b:
            troubles.append(t or f"{r.label}: no build phase")
        if not b:
            continue
        n = b["nodes"]
        it, rc = r.phase("stable", "iterative"), r.phase("stable", "recursive")
        if not b.get("converged"):
            probs.append(f"{r.label}: ring did not converge")
        for m, p in (("iterative", it), ("recursive", rc)):
            if not p:
                probs.append(f"{r.label}: no stable {m} phase")
                continue
            bad = p["wrong"] + p["failed"] + p["failed_unreachable"]
            if bad:
                probs.append(f"{r.label} {m}: {p['wrong']} wrong, {p['failed'] + p['failed_unreachable']} failed lookups")
            if not 0 <= p["rpcs_mean"] <= math.log2(n) + 2:
                probs.append(f"{r.label} {m}: {p['rpcs_mean']} RPCs per lookup outside [0, log2 N + 2]")
        g = lambda p, k: p[k] if p else float("nan")
        rows.append([n, fmt(b["seconds"]), "yes" if b.get("converged") else "**no**", fmt(b["kib_per_node"]),
                     f"{fmt(g(it, 'rpcs_mean'), 2)} ± {fmt(g(it, 'rpcs_sd'), 2)}",
                     f"{fmt(g(rc, 'rpcs_mean'), 2)} ± {fmt(g(rc, 'rpcs_sd'), 2)}", fmt(0.5 * math.log2(n), 2),
                     sum(p["failed"] + p["failed_unreachable"] + p["wrong"] for p in (it, rc) if p)])
        data["fig9.dat"].append([n, g(it, "rpcs_mean"), g(it, "rpcs_sd"), g(rc, "rpcs_mean"), g(rc, "rpcs_sd")])
        R.fig9[n] = (g(it, "rpcs_mean"), g(rc, "rpcs_mean"), b["kib_per_node"])
    data["paper.dat"] = [[1000, 5.7], [4096, 6.7]]
    png = R.plot("fig9", """set logscale x 2
set xlabel 'servers N'; set ylabel 'RPCs per lookup'
set xrange [8:8192]; set yrange [0:*]
plot 'fig9.dat' u ($1*0.95):2:3 w yerrorlines pt 7 t 'here: iterative (mean ± sd)', \\
     'fig9.dat' u ($1*1.05):4:5 w yerrorlines pt 5 t 'here: recursive (mean ± sd)', \\
     0.5*log(x)/log(2) w l dt 2 lw 2 t '½·log2 N', \\
     'paper.dat' u 1:2 w p pt 9 ps 2 t 'paper (text: 5.7 at 1,000, 6.7 at 4,096)'""", data)
    body = (f"**Paper** ({PAPER_CFS} §7.2.1, Fig. 9): for rings of up to 4,096 servers on one machine, "
            "10,000 lookups for random blocks from a single server; the mean RPC count grows as about "
            "½·log2 N — 6.7 RPCs at 4,096 servers, 5.7 at 1,000 (§7.2.3). **Here**: `cfs-ring` runs N Chord "
            "nodes in one process, waits until every successor list is right, then runs lookups for random "
            "keys from random live nodes, iterative and recursive; build time and memory per node come from "
            "the same run.\n\n" + missing_note(troubles))
    body += table(["N", "build s", "converged", "KiB per node", "iterative RPCs", "recursive RPCs",
                   "½·log2 N", "failed+wrong"], rows) + "\n" + png
    body += caption("RPCs per lookup against N (log2 axis), mean ± one sd; paper: ≈ ½·log2 N "
                    "(points from its text), here: both lookup modes.")
    pts = sorted((n, v[0]) for n, v in R.fig9.items() if v[0] == v[0])
    if len(pts) >= 2:
        (n0, r0), (n1, r1) = pts[0], pts[-1]
        slope = (r1 - r0) / (math.log2(n1) - math.log2(n0))
        mono = all(b[1] >= a[1] for a, b in zip(pts, pts[1:]))
        body += shape(mono and 0.35 <= slope <= 0.7,
                      f"RPCs per lookup grow by {fmt(slope, 2)} per doubling of N from {n0} to {n1} "
                      f"({'rising at every size' if mono else 'not rising at every size'}), where ½·log2 N "
                      f"grows by 0.5; they stay {fmt(0.5 * math.log2(n1) - r1, 2)} below ½·log2 N at N = {n1} "
                      "because a lookup ends at the first node whose successor list covers the key "
                      "(DHash++'s early answer) instead of going on to the key's predecessor, and its "
                      "first step is the asking node's own tables, not an RPC."
                      + ("" if mono else
                         " Where the count falls with N, the learned table is why: every node also keeps "
                         "up to 4,096 ring members met in traffic (`cfsd --learned-nodes`), so lookups "
                         "start nearer their keys, and it is most of the memory per node of the larger "
                         "rings."))
    else:
        body += shape(None, "fewer than two ring sizes ran.")
    R.section("fig9", "CFS Fig. 9: lookup cost against ring size", body)
    R.check("fig9", troubles + probs, f"{len(rows)} sizes")
    sizes = [n for n in (1024, 4096) if n in R.fig9] or sorted(R.fig9)[-1:]
    if not sizes:
        R.accept.append("RPCs per lookup: no fig9 run")
    for n in sizes:
        it, rc, _ = R.fig9[n]
        R.accept.append(f"RPCs per lookup at N = {n}: iterative {fmt(it, 2)}, recursive {fmt(rc, 2)} "
                        f"(½·log2 N = {fmt(0.5 * math.log2(n), 2)})")


# ------------------------------------------------------------ CFS Fig. 13-15

def fig13_gets(r):
    """The gets after the failure of one cfs-testbed fig13 run: (gets,
    failed, failed with every replica dead, failed with one alive,
    unfinished), or None."""
    fails = [e["t_ms"] for e in r.events if e["event"] == "fail"]
    summary = r.phase("gets")
    if not fails or not summary:
        return None
    t0 = min(fails)
    after = [o for o in r.gets(ok_only=False) if o["t_ms"] >= t0]
    bad = [o for o in after if o["status"] != 0]
    lost = sum(1 for o in bad if o.get("replicas_alive", -1) == 0)
    alive = sum(1 for o in bad if o.get("replicas_alive", -1) > 0)
    unfinished = int(summary.get("unfinished", 0))
    return len(after) + unfinished, len(bad) + unfinished, lost, alive, unfinished


def sec_fig13(R):
    runs, troubles = expected_runs(R, "fig13", "kill", "KILLS")
    runs.sort(key=lambda r: float(r.label.split("kill")[1]))
    succ = int(R.settings.get("KILL_SUCC", 0) or 0)
    probs, rows, dat = [], [], []
    for r in runs:
        f = float(r.label.split("kill")[1])
        p = r.phase("after-kill", "iterative")
        # cfs-ring exits 1 after a kill only for a wrong answer: judged below.
        if not r.exists or not p:
            troubles.append(r.trouble() or f"{r.label}: no after-kill phase")
            continue
        failed = 100.0 * (p["failed"] + p["failed_unreachable"]) / max(p["lookups"], 1)
        if not 0 <= failed <= 100:
            probs.append(f"{r.label}: failed {failed} % out of [0, 100]")
        if f >= 0.2 - 1e-9 and not p["timeouts_per_lookup"] > 0:
            probs.append(f"{r.label}: no timeouts per lookup after killing {f:.0%}")
        if p["wrong"]:
            probs.append(f"{r.label}: {p['wrong']} lookups answered a wrong successor")
        g = R.run("fig13", f"gets{r.label.split('kill')[1]}")
        gt = g.trouble() if g.exists else f"{g.label}: missing"
        gs = None if gt else fig13_gets(g)
        if gt or not gs:
            troubles.append(gt or f"{g.label}: no gets after the failure")
        pct = lambda x: 100.0 * x / max(gs[0], 1) if gs else float("nan")
        if gs and gs[0] < 50:
            probs.append(f"{g.label}: only {gs[0]} gets after the failure")
        st = r.phase("stable", "iterative")
        rows.append([f"{f:.0%}", p["nodes"], p["live_ids"], fmt(failed, 2), gs[0] if gs else "–",
                     fmt(pct(gs[1] if gs else 0), 2), fmt(pct(gs[2] if gs else 0), 2),
                     fmt(pct(gs[3] if gs else 0), 2), fmt(100 * f ** K_SUCC, 2),
                     fmt(st["rpcs_mean"], 2) if st else "–", fmt(p["rpcs_mean"], 2),
                     fmt(p["timeouts_per_lookup"], 3), p["wrong"]])
        dat.append([f, pct(gs[1]) if gs else float("nan"), p["rpcs_mean"], p["rpcs_sd"],
                    p["timeouts_per_lookup"], st["rpcs_mean"] if st else float("nan"), failed])
        if abs(f - 0.5) < 1e-9:
            if gs:
                R.accept.append(f"failed gets at 50 % failure: {fmt(pct(gs[1]), 2)} % of {gs[0]} "
                                f"(every replica dead: {fmt(pct(gs[2]), 2)} %, a replica alive: "
                                f"{fmt(pct(gs[3]), 2)} %, unanswered: {gs[4]}; 0.5^{K_SUCC} = "
                                f"{fmt(100 * 0.5 ** K_SUCC, 2)} %; paper 1.3 %); failed lookups "
                                f"{fmt(failed, 2)} %")
            else:
                R.accept.append(f"failed gets at 50 % failure: not measured; failed lookups {fmt(failed, 2)} %")
    if not any(abs(float(r.label.split('kill')[1]) - 0.5) < 1e-9 and r.phase("after-kill") for r in runs):
        R.accept.append("failed gets at 50 % failure: not measured")
    paper = {"paper.dat": [[0.5, 1.3]]}
    png = R.plot("fig13", f"""set multiplot layout 1,3
set xlabel 'fraction of servers failed'; set xrange [0:0.6]; set yrange [0:*]
set title 'failed gets (%)'
plot 'fig13.dat' u 1:2 w lp pt 7 t 'gets', 'fig13.dat' u 1:7 w lp pt 4 t 'lookups', \\
     100*x**{K_SUCC} w l dt 2 t 'f^{K_SUCC} (all replicas dead)', 'paper.dat' u 1:2 w p pt 9 ps 2 t 'paper'
set title 'RPCs per lookup'
plot 'fig13.dat' u 1:3:4 w yerrorlines pt 7 t 'after the kill (± sd)', 'fig13.dat' u 1:6 w lp dt 2 t 'before'
set title 'timeouts per lookup'
plot 'fig13.dat' u 1:5 w lp pt 7 t 'here', 1 w l dt 2 t 'paper: < 1'
unset multiplot""", {"fig13.dat": dat, **paper}, size="1200,450")
    body = (f"**Paper** ({PAPER_CFS} §7.2.5, Figs. 13–15): 1,000 servers with 2·log2 N successors each, six "
            "replicas per block; a fraction of the servers fail without warning and 1,000 fetches run "
            "before Chord repairs anything. No lookup fails below 20 % failed, 1.3 % fail at 50 % "
            "(0.5^6 = 1.6 % of blocks lose every replica), lookups take about one RPC more at 50 %, and a "
            "lookup meets less than one timeout. **Here**, the same: on "
            f"{rows[0][1] if rows else '?'} nodes with {succ or '?'} successors, `cfs-testbed --freeze` puts "
            "blocks with six replicas, fails the fraction at once (maintenance stopped, so nothing is "
            "repaired) and fetches random blocks from random live nodes; each get notes whether any node "
            "the block was stored on is alive, which splits the failed gets into those the paper expects "
            "(every replica dead, probability f^6) and those a live replica could have answered. "
            "Neighbouring blocks share replicas, so the share of blocks that lose all six varies from run "
            "to run more than f^6 of independent blocks would; the failures with a replica alive are what "
            "measures the implementation. "
            "`cfs-ring --kill F --freeze` runs iterative lookups on a ring of the same size for the RPCs "
            "and timeouts per lookup; a lookup fails when no live node's successor list reaches the key's "
            "live successor or no verified successor answers.\n\n" + missing_note(troubles))
    wrong = [f"{r[0]}: {r[-1]}" for r in rows if r[-1]]
    if wrong:
        body += (f"**Note:** lookups after the kill returned a wrong successor ({', '.join(wrong)}): "
                 "a live node that is not the key's true successor.\n\n")
    body += table(["failed", "nodes", "live IDs", "failed lookups %", "gets", "failed gets %",
                   "of which all replicas dead %", "of which a replica alive %", f"f^{K_SUCC} %",
                   "RPCs before", "RPCs after", "timeouts/lookup", "wrong"], rows)
    body += "\n" + png + caption("Failed gets and lookups, RPCs and timeouts per lookup against the fraction "
                                 "failed; paper: 1.3 % failed at 50 % (its Fig. 13), < 1 timeout per lookup; "
                                 f"the dashed curve is f^{K_SUCC}, the share of blocks that lose every replica.")
    half = [d for d in dat if abs(d[0] - 0.5) < 1e-9]
    if half and rows:
        f, _, after, _, tmo, before, lk = half[0]
        alive_fail = max((float(r[7]) for r in rows if r[7] not in ("–", "nan")), default=0.0)
        lows = [r for r in rows if float(r[0].rstrip("%")) < 20]
        low_ok = all(float(r[3]) == 0 for r in lows)
        cost_ok = after - before <= 2 and tmo < 1
        why = ("" if cost_ok else
               " Each dead finger or successor an iterative step picks costs an RPC and a timeout before "
               "the next candidate is asked, and with maintenance frozen none is replaced; the paper does "
               "not say how its simulator charged a timed-out hop.")
        body += shape(low_ok and alive_fail == 0 and cost_ok,
                      "Failures (Fig. 13): "
                      + ("" if not lows else "no lookup failed below 20 % failed, and " if low_ok
                         else "lookups failed below 20 % failed, and ")
                      + f"at most {fmt(alive_fail, 2)} % of gets failed while a replica was alive, so the "
                      "failed gets are the blocks that lost all six copies. Cost (Figs. 14–15): after "
                      f"{f:.0%} of the ring died a lookup took {fmt(after - before, 2)} more RPCs and met "
                      f"{fmt(tmo, 2)} timeouts; the paper has about one more RPC and fewer than one timeout."
                      + why)
    else:
        body += shape(None, "the 50 % failure did not run.")
    R.section("fig13", "CFS Figs. 13–15: lookups and fetches after massive failure", body)
    R.check("fig13", troubles + probs, f"{len(rows)} kill fractions")


# ------------------------------------------------------------ CFS Fig. 10 and 12

def placement(run):
    p = run.phase("placement")
    return (p["rows"], p["blocks"]) if p and p.get("rows") else (None, 0)


def sec_fig10(R):
    troubles, probs, rows, data, sds = [], [], [], {}, {}
    plots, n = [], 0
    for v in (1, 6, 24):
        r = R.run("fig10", f"v{v}")
        t = r.trouble()
        prow, blocks = placement(r)
        if t or not prow:
            troubles.append(t or f"{r.label}: no placement phase")
            continue
        shares = sorted(x["share"] for x in prow)
        n = len(shares)
        if abs(sum(shares) - 1) > 0.01:
            probs.append(f"{r.label}: shares sum to {sum(shares):.4f}")
        sds[v] = sd(shares)
        data[f"v{v}.dat"] = [[s, (i + 1) / n] for i, s in enumerate(shares)]
        plots.append(f"'v{v}.dat' u 1:2 w steps lw 2 t '{v} virtual server{'s' if v > 1 else ''}'")
        rows.append([f"{v} vnodes, key space", n, fmt(min(shares), 4), fmt(median(shares), 4),
                     fmt(max(shares), 4), fmt(sds[v], 4), fmt(max(shares) * n, 2), fmt(sum(shares), 4)])
        if v == 6 and blocks:
            real = sorted(x["stored"] / blocks for x in prow)
            data["real.dat"] = [[s, (i + 1) / n] for i, s in enumerate(real)]
            rows.append([f"6 vnodes, blocks stored ({blocks})", n, fmt(min(real), 4), fmt(median(real), 4),
                         fmt(max(real), 4), fmt(sd(real), 4), fmt(max(real) * n, 2), fmt(sum(real), 4)])
    if 1 in sds and 24 in sds and not sds[24] < sds[1]:
        probs.append(f"sd of shares does not fall from 1 to 24 vnodes ({sds[1]:.4f} -> {sds[24]:.4f})")
    elif not (1 in sds and 24 in sds):
        probs.append("cannot compare the spread of shares for 1 and 24 vnodes")
    if "real.dat" in data:
        plots.append("'real.dat' u 1:2 w p pt 2 ps 1.5 t 'real: blocks stored, 6 vnodes'")
    png = R.plot("fig10", f"""set xlabel 'fraction of the key space per physical server'
set ylabel 'cumulative fraction of servers'; set key bottom right; set yrange [0:1.02]; set xrange [0:*]
set arrow from {1 / max(n, 1)},0 to {1 / max(n, 1)},1.02 nohead dt 3 lw 2
set label 'ideal 1/N' at {1 / max(n, 1)},0.05 offset 1,0
plot {', '.join(plots) if plots else '0 t "no data"'}""", data)
    body = (f"**Paper** ({PAPER_CFS} §7.2.2, Fig. 10): 64 servers with 1, 6 or 24 virtual servers each; the "
            "cumulative distribution of each server's share of the ID space tightens around the ideal "
            "1/64 = 0.016 as virtual servers are added; \"Real\" is 10,000 blocks over 64 servers with 6 "
            "virtual servers. **Here**: `cfs-testbed --workload placement` builds the ring with V virtual "
            "servers per node and reports each physical node's share of the key space (the arcs ending at its "
            "IDs) and the blocks it stores (one replica).\n\n" + missing_note(troubles))
    body += table(["distribution", "servers", "min", "median", "max", "sd", "max ÷ ideal", "sum"], rows)
    body += "\n" + png + caption(f"CDF of the share per physical server; paper: 64 servers, ideal 0.016; "
                                 f"here: {n} servers, ideal 1/{n}.")
    if 1 in sds and 24 in sds:
        body += shape(sds[24] < sds.get(6, sds[1]) < sds[1] or sds[24] < sds[1],
                      "The spread of the shares around 1/N falls as virtual servers are added (sd "
                      + " → ".join(f"{sds[v]:.4f}" for v in sorted(sds)) + " for "
                      + ", ".join(str(v) for v in sorted(sds)) + " virtual servers), as in the paper.")
    else:
        body += shape(None, "the 1- or 24-virtual-server run is missing.")
    R.section("fig10", "CFS Fig. 10: key space per server with virtual servers", body)
    R.check("fig10", troubles + probs, "sd of shares " + " > ".join(f"{sds[v]:.4f}" for v in sorted(sds)))


def sec_fig12(R):
    r = R.run("fig12", "vlist")
    t = r.trouble()
    prow, blocks = placement(r)
    troubles = [t] if t else ([] if prow else [f"{r.label}: no placement phase"])
    probs, rows, dat = [], [], []
    if prow:
        tot = sum(x["vnodes"] for x in prow)
        for x in sorted(prow, key=lambda x: x["vnodes"]):
            exp_ = blocks * x["vnodes"] / tot
            rows.append([x["vnodes"], x["stored"], fmt(exp_, 0), fmt(x["share"], 4)])
            dat.append([x["vnodes"], x["stored"], exp_])
        stored = sum(x["stored"] for x in prow)
        if stored != blocks:
            probs.append(f"{stored} blocks stored in all, {blocks} put")
        lo, hi = min(prow, key=lambda x: x["vnodes"]), max(prow, key=lambda x: x["vnodes"])
        if not hi["stored"] > lo["stored"]:
            probs.append(f"the {hi['vnodes']}-vnode server stores {hi['stored']}, the {lo['vnodes']}-vnode one {lo['stored']}")
        expect = f"{blocks}·v/{tot}"
    else:
        expect, tot = "blocks·v/Σv", 1
    png = R.plot("fig12", f"""set xlabel 'virtual servers on the physical server'; set ylabel 'blocks stored'
set xrange [0:*]; set yrange [0:*]
plot 'fig12.dat' u 1:2 w p pt 7 ps 1.5 t 'here', 'fig12.dat' u 1:3 w l dt 2 lw 2 t 'expected {expect}'""",
                 {"fig12.dat": dat})
    body = (f"**Paper** ({PAPER_CFS} §7.2.4, Fig. 12): physical servers with 1, 2, 4, … virtual servers "
            "and 10,000 blocks; blocks stored grow linearly with the virtual servers — the one with 16 of "
            "255 stores 586 blocks against 627 expected. **Here**: `cfs-testbed --vnodes-list 1,2,…,64` (7 "
            "physical nodes, one replica) and the blocks each stores after the puts.\n\n" + missing_note(troubles))
    body += table(["virtual servers", "blocks stored", "expected blocks·v/Σv", "key-space share"], rows)
    body += "\n" + png + caption("Blocks stored against virtual servers per physical server; paper: linear, "
                                 "586 vs 627 at 16 of 255; here: points against blocks·v/Σv.")
    if dat:
        worst = max(dat, key=lambda x: abs(x[1] - x[2]) / max(x[2], 1))
        fit = sum(x[1] * x[2] for x in dat) / max(sum(x[2] ** 2 for x in dat), 1e-9)
        body += shape(abs(fit - 1) <= 0.25 and dat[-1][1] > dat[0][1],
                      f"Blocks stored grow linearly with the virtual servers: a line through the origin "
                      f"fits them at {fit:.2f} times blocks·v/Σv (paper: the server with 16 of 255 was 7 % "
                      f"under its share). Single servers vary most where they have few virtual servers, "
                      f"whose arcs are few and uneven: the one with {worst[0]} stores {worst[1]} against "
                      f"{fmt(worst[2], 0)} expected.")
    else:
        body += shape(None, "no placement ran.")
    R.section("fig12", "CFS Fig. 12: storage against virtual servers", body)
    R.check("fig12", troubles + probs, f"{len(rows)} servers")


# ------------------------------------------------------------ CFS Fig. 11

def sec_fig11(R):
    r = R.run("fig11", "hot")
    t = r.trouble()
    hot = sorted((o for o in r.ops if o["op"] == "hot"), key=lambda o: o["arg"])
    troubles = [t] if t else ([] if hot else [f"{r.label}: no hot fetches in ops.csv"])
    probs, rows, dat = [], [], []
    bad = [o for o in hot if o["status"] != 0]
    ph = r.phase("hot")
    if bad or (ph and ph.get("failed")):
        probs.append(f"{len(bad)} failed fetches")
    groups = [hot[i:i + 10] for i in range(0, len(hot), 10)]
    for i, g in enumerate(groups):
        rp = [o["rpcs"] for o in g]
        rows.append([f"{i * 10 + 1}–{i * 10 + len(g)}", fmt(mean(rp), 2), fmt(sd(rp), 2)])
        dat.append([i * 10 + len(g), mean(rp), sd(rp)])
    if len(groups) >= 2 and dat[-1][1] > dat[0][1]:
        probs.append(f"the last group needs more RPCs ({dat[-1][1]:.2f}) than the first ({dat[0][1]:.2f})")
    b = r.phase("build")
    n = b["nodes"] if b else "?"
    png = R.plot("fig11", """set xlabel 'cumulative fetches'; set ylabel 'RPCs per fetch'
set yrange [0:*]; set xrange [0:*]; set offsets 2,2,0.5,0
plot 'fig11.dat' u 1:2:3 w yerrorlines pt 7 t 'here: mean of 10 fetches ± sd', \\
     'paper.dat' u 1:2 w p pt 9 ps 2 t 'paper (text): 5.7 without caching, 3.2 after 10'""",
                 {"fig11.dat": dat, "paper.dat": [[0, 5.7], [10, 3.2]]})
    body = (f"**Paper** ({PAPER_CFS} §7.2.3, Fig. 11): one block in a 1,000-server system, fetched by a "
            "sequence of random servers with caching along the lookup path; each point is the mean of 10 "
            "successive fetches. Without caching a lookup takes 5.7 RPCs; after 10 fetches 3.2. **Here**: "
            f"`cfs-testbed --caching --workload hot --guess 0` with {n} nodes; RPCs per fetch from ops.csv. "
            "Gets always look up here: the caches are on the lookup paths, and a get that guesses its "
            "holders from the learned table (the default, `cfsd --guess-holders`) takes no path, and "
            "about one RPC.\n\n"
            + missing_note(troubles))
    body += table(["fetches", "mean RPCs", "sd"], rows) + "\n" + png
    body += caption(f"RPCs per fetch of one hot block, groups of 10; paper: 1,000 servers; here: {n} nodes.")
    if len(dat) >= 2:
        body += shape(dat[-1][1] < dat[0][1],
                      f"RPCs per fetch fall as copies spread along the lookup paths: {fmt(dat[0][1], 2)} for "
                      f"the first 10 fetches, {fmt(dat[-1][1], 2)} for the last (paper: 5.7 without caching, "
                      "3.2 after 10). The absolute counts are lower than the paper's because lookups end "
                      "where a successor list covers the key (see Fig. 9).")
    else:
        body += shape(None, "fewer than 20 fetches ran.")
    R.section("fig11", "CFS Fig. 11: caching a hot block", body)
    R.check("fig11", troubles + probs, f"{len(hot)} fetches")


# ------------------------------------------------------------ get latency

def get_stats(run):
    ok, every = run.gets(), run.gets(False)
    lat = [o["latency_ms"] for o in ok]
    orc = [o["oracle_ms"] for o in every if o["oracle_ms"] > 0]
    return {
        "gets": len(every), "ok": len(ok), "succ": 100.0 * len(ok) / len(every) if every else float("nan"),
        "avg": mean(lat), "p50": median(lat), "p90": quantile(lat, 0.9), "p99": quantile(lat, 0.99),
        "lookup": median([o["lookup_ms"] for o in ok]),
        "rest": median([o["latency_ms"] - o["lookup_ms"] for o in ok]),
        "rpcs": mean([o["rpcs"] for o in every]), "oracle": orc,
        "msgs": (run.phase("gets") or {}).get("msgs_per_get", float("nan")),
        "bytes": (run.phase("gets") or {}).get("bytes_per_get", float("nan")),
    }


def latency_checks(run, s):
    t = run.trouble()
    if t:
        return [t]
    p = []
    if not s["gets"]:
        return [f"{run.label}: no gets in ops.csv"]
    if not s["succ"] >= 95:
        p.append(f"{run.label}: {s['succ']:.1f} % of gets succeeded")
    if not 0 < s["p50"] < 5000:
        p.append(f"{run.label}: median get {s['p50']} ms")
    if not median(s["oracle"]) > 0:
        p.append(f"{run.label}: no oracle latency")
    return p


DHASHPP = [("base", "iterative, PNS off, lookup to the predecessor, fetch in ring order"),
           ("recursive", "+ recursive lookup"),
           ("pns", "+ proximity neighbour selection, PNS(16)"),
           ("nearest", "+ fetch from the nearest replica (Vivaldi)"),
           ("integrated", "+ integrated lookup and fetch (stop where the successor list covers the key)")]


def sec_dhashpp(R):
    probs, rows, dat, present = [], [], [], 0
    for name, what in DHASHPP:
        r = R.run("dhashpp", name)
        s = get_stats(r)
        probs += latency_checks(r, s)
        if not s["ok"]:
            rows.append([name, what, "–", "–", "–", "–", "–", "–", "–", r.trouble() or "no successful get"])
            continue
        present += 1
        rows.append([name, what, s["gets"], fmt(s["succ"]), fmt(s["lookup"]), fmt(s["rest"]), fmt(s["p50"]),
                     fmt(s["p99"]), fmt(s["msgs"], 1), fmt(s["bytes"], 0)])
        dat.append([name, s["lookup"], s["rest"]])
        if name == "integrated":
            R.accept.append(f"get latency, all DHash++ techniques: median {fmt(s['p50'])} ms, p99 "
                            f"{fmt(s['p99'])} ms; oracle median {fmt(median(s['oracle']))} ms, p99 "
                            f"{fmt(quantile(s['oracle'], 0.99))} ms")
    png = R.plot("dhashpp", """set style data histograms; set style histogram rowstacked
set style fill solid 0.8 border -1; set boxwidth 0.6; set ylabel 'median time (ms)'; set yrange [0:*]
set key top right
plot 'dhashpp.dat' u 2:xtic(1) t 'lookup (median)' lc rgb '#404080', '' u 3 t 'rest: fetch (median)' lc rgb '#a0c0f0'""",
                 {"dhashpp.dat": dat})
    body = ("**Paper** (DHash++, NSDI 2004, Fig. 4 and 12): the median of 1,000 fetches of random 8 KB blocks "
            "on PlanetLab as each technique is added — recursive instead of iterative lookup, proximity "
            "neighbour selection, fetching from the closest copy, integrated lookup and fetch — split into "
            "lookup time and fetch time. Its text gives the trend, not the bars' values: together the "
            "techniques cut the fetch latency by nearly a factor of two, and recursive lookups take about "
            "0.6 times as long as iterative ones (simulation, Fig. 5). **Here**: `cfs-testbed --workload gets` "
            "under the network model (median RTT 130 ms), each configuration a separate run; medians of "
            "lookup_ms and of latency_ms − lookup_ms over the successful gets of ops.csv. The first four "
            "runs route every lookup to the key's predecessor (`--mode ...,pred`, classic Chord); the "
            "last lets a hop whose successor list already covers the key with enough successors answer "
            "(DHash++ Fig. 10), which is the default. Ring maintenance is frozen once the ring is built "
            "(`--freeze`), so messages and bytes per get count every datagram the nodes sent during the "
            "gets.\n\n")
    body += table(["run", "configuration", "gets", "success %", "lookup p50 ms", "rest p50 ms",
                   "total p50 ms", "total p99 ms", "msgs/get", "bytes/get"], rows)
    body += "\n" + png + caption("Median lookup and fetch time as each technique is switched on; paper: "
                                 "PlanetLab, nearly ×2 faster overall; here: the network model.")
    med = {d[0]: d[1] + d[2] for d in dat}
    if "base" in med and "integrated" in med:
        gain = med["base"] / max(med["integrated"], 1e-9)
        steps = [n for n, _ in DHASHPP if n in med]
        worse = [f"{a} → {b}" for a, b in zip(steps, steps[1:]) if med[b] > med[a] * 1.05]
        body += shape(gain >= 1.5 and not worse,
                      f"Together the techniques cut the median fetch time {gain:.1f}× (paper: nearly 2×)"
                      + (f"; every step helps or holds" if not worse else
                         f"; but these steps made it slower by more than 5 %: {', '.join(worse)}")
                      + ". The bars split lookup and fetch as the paper does; the model's RTTs are not "
                      "PlanetLab's, so only the trend is compared.")
    else:
        body += shape(None, "the base or the integrated run is missing.")
    R.section("dhashpp", "DHash++ Fig. 4/12: latency optimisations", body)
    R.check("dhashpp", probs, f"{present} configurations")


# run, I/R, p, gateways, routing, extra
OPENDHT = [("rec-greedy", "R", 1, 1, "greedy", ""), ("rec-cost", "R", 1, 1, "CFS cost (4.3)", ""),
           ("rec-nonlinear", "R", 1, 1, "nonlinear", ""), ("iter-greedy-p1", "I", 1, 1, "greedy", ""),
           ("iter-greedy-p2", "I", 2, 1, "greedy", ""), ("iter-greedy-p3", "I", 3, 1, "greedy", ""),
           ("iter-nonlinear-p3", "I", 3, 1, "nonlinear", ""),
           ("rec-nonlinear-gw2", "R", 1, 2, "nonlinear", ""),
           ("iter-greedy-p3-gw2", "I", 3, 2, "greedy", ""),
           ("rec-nonlinear-hedged", "R", 1, 1, "nonlinear", "hedged, 250 ms"),
           ("cfsd-default", "I", 2, 1, "nonlinear", "cfsd's defaults")]
OPENDHT_PAPER = [["2", "1", "R", "1", "greedy", 282, 149, 407, 4409, 5.5, 1833],
                 ["4", "1", "R", "1", "linear", 201, 99, 275, 3219, 6.8, 2210],
                 ["5", "1", "R", "1", "nonlinear", 185, 104, 263, 1830, 6.0, 1987],
                 ["6", "1", "I", "3", "greedy", 157, 116, 315, 788, 14.6, 3834],
                 ["9", "1", "I", "3", "nonlinear", 230, 175, 455, 1103, 18.3, 4458],
                 ["12", "1–2", "R", "1", "nonlinear", 107, 71, 171, 609, 11.9, 3973],
                 ["15", "1–2", "I", "3", "greedy", 88, 70, 195, 321, 29.3, 7668],
                 ["16", "1–2", "I", "1", "greedy", 141, 96, 289, 638, 13.9, 4194],
                 ["17", "1–2", "I", "2", "greedy", 97, 78, 217, 375, 22.5, 6181],
                 ["oracle", "", "", "", "closest replica, one RTT", "", 31, 76, 130, "", ""]]


STRETCH_RUNS = ["iter-greedy-p1", "rec-nonlinear", "cfsd-default"]


def stretch_part(R):
    """Tapestry's stretch (RDP): each successful get's latency over its own
    oracle (one RTT from the gateway to the nearest replica), as a CDF."""
    rows, cdfs = [], {}
    for name in STRETCH_RUNS:
        r = R.run("opendht", name)
        st = sorted(o["latency_ms"] / o["oracle_ms"] for o in r.gets() if o["oracle_ms"] > 0)
        if not st:
            continue
        rows.append([name, fmt(median(st), 2), fmt(quantile(st, 0.9), 2), fmt(quantile(st, 0.99), 2),
                     fmt(100.0 * sum(1 for x in st if x <= 2) / len(st), 1)])
        cdfs[f"stretch-{name}.dat"] = [[x, (i + 1) / len(st)] for i, x in enumerate(st)]
    if not rows:
        return ""
    plots = ", ".join(f"'{f}' u 1:2 w l lw 2 t '{f[8:-4]}'" for f in cdfs)
    png = R.plot("stretch", "set xlabel 'get latency / oracle (stretch)'; set ylabel 'fraction of gets'\n"
                 "set logscale x; set xrange [1:*]; set yrange [0:1]; set key bottom right\n"
                 f"plot {plots}", cdfs)
    return ("\n**Stretch** (the Tapestry paper's RDP figures): each successful get's latency over "
            "its own oracle. cfsd-default is what a ring of `cfsd` with default settings runs "
            "(iterative lookups, OpenDHT's delay-aware next hops, two asks at once, and gets that "
            "skip the lookup when learned members lie just after the key); the other rows always "
            "look up.\n\n"
            + table(["run", "stretch p50", "p90", "p99", "gets within 2× %"], rows)
            + "\n" + png + caption("CDF of get latency over the oracle; Tapestry measured its RDP the "
                                  "same way (latency over the direct IP path)."))


def sec_opendht(R):
    probs, rows, dat, oracle, best = [], [], [], [], None
    for name, ir, par, gw, mode, extra in OPENDHT:
        r = R.run("opendht", name)
        s = get_stats(r)
        probs += latency_checks(r, s)
        oracle += s["oracle"]
        if not s["ok"]:
            rows.append([name, gw, ir, par, mode, extra, "–", "–", "–", "–", "–", "–",
                         r.trouble() or "no gets"])
            continue
        if not s["msgs"] > 0 or not s["bytes"] > 0:
            probs.append(f"{r.label}: no messages or bytes per get counted")
        rows.append([name, gw, ir, par, mode, extra, fmt(s["avg"]), fmt(s["p50"]), fmt(s["p90"]), fmt(s["p99"]),
                     fmt(s["msgs"], 1), fmt(s["bytes"], 0), fmt(s["succ"], 1)])
        dat.append([name, s["p50"], s["p90"], s["p99"]])
        if best is None or s["p99"] < best[1]["p99"]:
            best = (name, s)
    ostat = [mean(oracle), median(oracle), quantile(oracle, 0.9), quantile(oracle, 0.99)]
    rows.append(["oracle", "", "", "", "nearest replica, one RTT", "", *(fmt(x) for x in ostat), "", "", ""])
    if oracle:
        dat.append(["oracle", ostat[1], ostat[2], ostat[3]])
    if best:
        s = best[1]
        R.accept.append(f"get latency, best OpenDHT row ({best[0]}, lowest p99): median {fmt(s['p50'])} ms, "
                        f"p99 {fmt(s['p99'])} ms; oracle median {fmt(median(s['oracle']))} ms, "
                        f"p99 {fmt(quantile(s['oracle'], 0.99))} ms")
    png = R.plot("opendht", """set style data histograms; set style histogram clustered gap 1
set style fill solid 0.8 border -1; set ylabel 'get latency (ms)'; set logscale y; set yrange [1:*]
set xtics rotate by -30; set key top left; set bmargin 7
plot 'opendht.dat' u 2:xtic(1) t 'p50', '' u 3 t 'p90', '' u 4 t 'p99'""", {"opendht.dat": dat})
    body = ("**Paper** (OpenDHT on PlanetLab, Table 1): 27,046 gets per mode from one client; routing rules "
            "(greedy, proximity, linear and nonlinear delay scaling), recursive or iterative gets with "
            "parallelism p, one to four gateways; latency percentiles and messages and bytes per get (its "
            "values are 20 bytes). Its oracle — the closest of eight replicas in one RTT — has a median of "
            "31 ms, p90 76 ms, p99 130 ms. **Here**: the network model with 5 % slow nodes; latency "
            "percentiles from the successful gets of ops.csv. Iterative gets keep up to p requests in "
            "flight (`--mode iterative,...,pP`); with two gateways (`--gateways 2`) each get starts at two "
            "random nodes at once and the first verified block answers it; hedged gets re-send the fetch "
            "to the next replica after 250 ms. Messages and bytes per get are every datagram the nodes "
            "sent during the gets (maintenance frozen, `--freeze`) over the gets; a get here returns an "
            "8 KB block, so bytes are not comparable with the paper's. The oracle row is one RTT from the "
            "(nearest) gateway to its nearest replica, over all the runs' gets.\n\n")
    body += table(["run", "GW", "I/R", "p", "routing", "extra", "avg ms", "p50 ms", "p90 ms", "p99 ms",
                   "msgs/get", "bytes/get", "success %"], rows)
    body += "\nThe paper's rows for reference (PlanetLab, ms):\n\n"
    body += table(["row", "GW", "I/R", "p", "mode", "avg", "p50", "p90", "p99", "msgs", "bytes"], OPENDHT_PAPER)
    body += "\n" + png + caption("Get latency percentiles per routing configuration (log scale); paper: "
                                 "PlanetLab, e.g. recursive nonlinear p50/p99 104/1830 ms, two gateways "
                                 "iterative p = 3 70/321 ms, oracle 31/130 ms; here: the network model with "
                                 "5 % slow nodes, and its oracle.")
    p99 = {d[0]: d[3] for d in dat}
    if "rec-greedy" in p99 and best:
        base = p99["rec-greedy"]
        gw = min((p99[n] for n in ("rec-nonlinear-gw2", "iter-greedy-p3-gw2") if n in p99), default=None)
        body += shape(best[1]["p99"] < base and (gw is None or gw < base),
                      f"Delay-aware routing, parallel asks and a second gateway cut the tail: p99 "
                      f"{fmt(base)} ms for recursive greedy, {fmt(best[1]['p99'])} ms at best ({best[0]})"
                      + (f", {fmt(gw)} ms with two gateways" if gw is not None else "")
                      + " — the paper's order, where two gateways with iterative p = 3 gave the lowest p99. "
                      "The slow nodes here are the model's 5 % with a long-tailed extra delay, not "
                      "PlanetLab's, so the values are not comparable.")
    else:
        body += shape(None, "the recursive greedy run is missing.")
    body += stretch_part(R)
    R.section("opendht", "OpenDHT Table 1: tail latency with slow nodes", body)
    R.check("opendht", probs, f"{len(dat) - (1 if oracle else 0)} configurations")


# ------------------------------------------------------------ coded

CODED = [("copies", 1, 6, "6 whole copies (k = 6)"), ("2-6", 2, 6, "rs:2/6"), ("4-12", 4, 12, "rs:4/12"),
         ("7-14", 7, 14, "rs:7/14 (DHash++'s IDA)")]


def sec_coded(R):
    probs, rows, p50s = [], [], []
    for name, m, n, label in CODED:
        r = R.run("coded", name)
        s = get_stats(r)
        probs += latency_checks(r, s)
        if not s["ok"]:
            rows.append([label, "–", "–", "–", "–", "–", "–", r.trouble() or "no gets"])
            continue
        o = median(s["oracle"])
        rows.append([label, fmt(n / m if m > 1 else 6, 1) + "×", fmt(s["p50"]), fmt(s["p90"]), fmt(s["p99"]),
                     fmt(o), fmt(s["p50"] / o if o else float("nan"), 2), fmt(s["msgs"], 1), fmt(s["succ"], 1)])
        p50s.append((m, s["p50"], o))
    body = ("**Paper** (DHash++ §4.4, Fig. 9, PlanetLab and simulation): a block as l fragments of which m "
            "rebuild it (IDA), fetched from the m nearest holders; fetch latency grows with m, since the "
            "get waits for the m-th nearest holder, and replication (m = 1) is the fastest; DHash++ chose "
            "7 of 14 for its storage and availability, at a latency cost. **Here**: the network model "
            "(median RTT 130 ms) on the rows' addresses and seed, cfsd's settings (`--mode cfsd --guess 5`), "
            "successor lists of 16; gets of 8 KB blocks stored whole on 6 servers or as rs:M/N fragments "
            "(`cfs-testbed --code M/N`: fetch from the m nearest holders by prediction and two more). The "
            "oracle of a coded get is the RTT to the m-th nearest of its n holders; of a replicated one, "
            "to the nearest replica.\n\n")
    body += table(["blocks", "storage", "p50 ms", "p90 ms", "p99 ms", "oracle p50 ms", "p50 / oracle",
                   "msgs/get", "success %"], rows)
    if len(p50s) == len(CODED):
        # the paper's trend: replication fastest, the widest m slowest (2-of-6
        # and 4-of-12 wait for about the same holder: their order is noise)
        first = all(p50s[0][1] < p[1] for p in p50s[1:])
        last = all(p50s[-1][1] * 1.1 + 5 >= p[1] for p in p50s[:-1])
        ratio = [p / o for _, p, o in p50s if o]
        body += "\n" + shape(first and last,
                             f"Median get latency grows with the fragments a get needs: "
                             f"{', '.join(fmt(p) for _, p, _ in p50s)} ms for m = 1, 2, 4, 7, and so does "
                             f"its oracle ({', '.join(fmt(o) for _, _, o in p50s)} ms): a coded get waits "
                             "for the m-th nearest holder. Replication is the fastest, as in the paper; "
                             "the model's RTTs are not PlanetLab's, so only the trend is compared. Coded "
                             f"gets are {fmt(min(ratio[1:]), 1)}–{fmt(max(ratio[1:]), 1)}× their oracle "
                             f"where replicated ones are {fmt(ratio[0], 2)}×: a replicated get with cfsd's "
                             "settings skips its lookup when the learned table names the key's holders, "
                             "and a coded get always looks its key up first (the messages per get say so).")
    else:
        body += shape(None, "some runs are missing.")
    R.section("coded", "DHash++ Fig. 9: coded against replicated blocks", body)
    R.check("coded", probs, f"{len(p50s)} configurations")


# ------------------------------------------------------------ availability

AVAIL_CODES = (("copies", "copies:6", 1, 6), ("8-24", "rs:8/24", 8, 24))


def block_availability(m, l, a):
    """DHash++ Equation 1: a block of m-of-l fragments (replication: 1 of l)
    with each holder up with probability a is readable with at least m up."""
    return sum(math.comb(l, i) * a ** i * (1 - a) ** (l - i) for i in range(m, l + 1))


def avail_snap(R, a, name, label, m, l, probs):
    r = R.run("avail", f"snap-{name}-a{a}")
    arith = 100 * (1 - block_availability(m, l, float(a)))
    fails = [e["t_ms"] for e in r.events if e.get("event") == "fail"]
    t = r.trouble()
    after = [o for o in r.gets(ok_only=False) if fails and o["t_ms"] >= min(fails)]
    if t or not after:
        probs.append(t or f"{r.label}: no gets after the failure")
        return [a, label, "–", "–", "–", f"{arith:.2g}", t or "no gets"], None
    unfinished = int((r.phase("gets") or {}).get("unfinished", 0))
    bad = [o for o in after if o["status"] != 0]
    few = sum(1 for o in bad if 0 <= o.get("replicas_alive", -1) < m)
    n = len(after) + unfinished
    pct = 100 * (len(bad) + unfinished) / n
    live = 100 * (len(bad) - few + unfinished) / n
    return [a, label, n, fmt(pct, 2), fmt(live, 2), f"{arith:.2g}", ""], (pct, arith, live)


def avail_flap(R, a, name, label, m, l, probs):
    r = R.run("avail", f"flap-{name}-a{a}")
    arith = 100 * (1 - block_availability(m, l, float(a)))
    g = r.phase("gets") or {}
    t = r.trouble()
    backs = sum(1 for e in r.events if e.get("event") == "back")
    times = [e["t_ms"] for e in r.events if e.get("event") in ("fail", "back")]
    gets = [o for o in r.gets(ok_only=False) if times and min(times) <= o["t_ms"] <= max(times)]
    if t or not gets or not backs:
        probs.append(t or f"{r.label}: " + ("no node came back" if not backs else "no gets while nodes flapped"))
        return [a, label, "–", "–", "–", "–", f"{arith:.2g}", "–", t or "missing"], None
    up = [e["alive"] for e in r.events if e.get("event") in ("fail", "back") and e["t_ms"] > min(times) + 1000]
    nodes = (r.phase("build") or {}).get("nodes", 0)
    failed = 100 * sum(1 for o in gets if o["status"] != 0) / len(gets)
    res = {"failed": failed, "truth": g.get("truth_unreadable_pct", float("nan")), "arith": arith,
           "repair": g.get("repair_bytes_per_node_s", float("nan")), "sent": g.get("sent_bytes_per_node_s"),
           "up": (mean(up) / nodes) if up and nodes else float("nan")}
    return [a, label, len(gets), fmt(100 * res["up"], 0), fmt(failed, 2), fmt(res["truth"], 2), f"{arith:.2g}",
            fmt(res["repair"], 0), fmt(res["sent"], 0)], res


def sec_avail(R):
    probs, srows, frows, snap, flap = [], [], [], [], {}
    for a in R.settings.get("AVAILS", "").split():
        for name, label, m, l in AVAIL_CODES:
            row, res = avail_snap(R, a, name, label, m, l, probs)
            srows.append(row)
            if res:
                snap.append((a, label) + res)
            row, res = avail_flap(R, a, name, label, m, l, probs)
            frows.append(row)
            if res:
                flap[(a, label)] = res
    body = ("**Question** (DHash++ §4.4, Equation 1; Carbonite, NSDI 2006): with each node up with "
            "probability a, a block stored as l fragments of which m rebuild it is readable while m of its "
            "l holders are up (6 copies: m = 1 of 6). rs:8/24 stores 3 bytes per byte published, 6 copies "
            "6. **Here**, two experiments with `cfs-testbed` (tests/testbed/eval.sh has the commands):\n\n"
            "- *snapshot*: a frozen ring (no maintenance, no repair) loses a fraction 1 − a of its nodes at "
            "once, and random live nodes fetch random blocks, 50 a second for 10 s; each get notes how many of "
            "the nodes its block was put on are alive. Neighbouring blocks share holders, so a run's blocks "
            "are not independent draws.\n\n")
    body += table(["a", "blocks", "gets", "unavailable %", "of which with m holders alive %",
                   "Equation 1 %", "note"], srows)
    cyc, dur = R.settings.get("AVAIL_CYCLE", "?"), R.settings.get("AVAIL_S", "?")
    body += ("\n- *transient failures*: every node alternates between up (exponential, mean a·"
             f"{cyc} s) and crashed (mean (1 − a)·{cyc} s), coming back with what it stored, for {dur} s "
             "(`at 5 flap for S up U down W`), while replica maintenance and each server's fragment "
             "repair (`--frag-repair-ms 5000`: Carbonite's threshold m + ⌈(l − m)/2⌉, nothing deleted) "
             "run every 5 s; random live nodes fetch random blocks, 10 a second. *Unreadable by the truth*: "
             "blocks with no copy, or fewer than m distinct fragments, on the live nodes, sampled every "
             "second from their stores: what a perfect get could not have read. *Repair*: the block bytes "
             "replica maintenance pushed and fetched, and the fragment repairers read and stored, per live "
             "node and second; *sent*: every byte the nodes sent (gets, lookups, stabilization, repair).\n\n")
    body += table(["a", "blocks", "gets", "nodes up %", "failed gets %", "unreadable by the truth %",
                   "Equation 1 %", "repair B/node/s", "sent B/node/s"], frows)
    if snap:
        off = [f"{lb} at a = {a}: {p:.2f} % against {ar:.2f} %" for a, lb, p, ar, _ in snap
               if abs(p - ar) > max(2 * ar, 2.0)]
        live = [f"{lb} at a = {a}: {x:.2f} %" for a, lb, _, _, x in snap if x > 1.0]
        verdict = not off and not live
        text = ("Snapshot: unavailable gets " + ("within twice Equation 1 (or 2 points) everywhere"
                if not off else "further than twice Equation 1 (and 2 points) in " + "; ".join(off))
                + ("; gets failing with m holders alive stay under 1 %." if not live else
                   "; gets failed although m holders were alive: " + "; ".join(live) + "."))
        cmp = []
        for a in R.settings.get("AVAILS", "").split():
            c, rs = flap.get((a, "copies:6")), flap.get((a, "rs:8/24"))
            if c and rs:
                cmp.append(f"at a = {a}, {fmt(rs['failed'], 2)} % of rs:8/24 gets failed against "
                           f"{fmt(c['failed'], 2)} % of copies:6, with {fmt(rs['repair'], 0)} against "
                           f"{fmt(c['repair'], 0)} repair bytes per node and second")
        if cmp:
            text += " Transient failures: " + "; ".join(cmp) + "."
        body += shape(verdict, text)
    else:
        body += shape(None, "no snapshot runs.")
    body += exp_note(R, "avail")
    R.section("avail", "Availability: coded against replicated blocks", body)
    R.check("avail", probs, f"{len(snap)} snapshots, {len(flap)} transient-failure runs")
    for (a, label), res in sorted(flap.items()):
        R.accept.append(f"availability {a}, {label}: {fmt(res['failed'], 2)} % of gets failed "
                        f"(Equation 1: {res['arith']:.2g} %), {fmt(res['repair'], 0)} repair B/node/s")


# ------------------------------------------------------------ churn

def bursts(events, least=3):
    """Massive events: at least `least` events of one kind within 50 ms."""
    out, cur = [], None
    for e in sorted((e for e in events if e["t_ms"] > 0), key=lambda e: e["t_ms"]):
        if cur and e["event"] == cur[1] and e["t_ms"] - cur[0] <= 50:
            cur[2] += 1
        else:
            cur = [e["t_ms"], e["event"], 1]
            out.append(cur)
    return [b for b in out if b[2] >= least]


def buckets(run, width_ms):
    gets = run.gets(False)
    e = run.phase("end") or {}
    # The schedule's end, not the run's (which waits for the gets in flight).
    end = e["end_ms"] if e.get("end_ms") else max([o["t_ms"] for o in gets] + [e.get("t_ms", 0)])
    nb = int(end // width_ms) + 1
    bs = [{"t": i * width_ms, "n": 0, "ok": 0, "lat": [], "alive": None} for i in range(nb)]
    for o in gets:
        b = bs[min(int(o["t_ms"] // width_ms), nb - 1)]
        b["n"] += 1
        if o["status"] == 0:
            b["ok"] += 1
            b["lat"].append(o["latency_ms"])
    ev = sorted(run.events, key=lambda e: e["t_ms"])
    j, alive = 0, 0
    for b in bs:
        while j < len(ev) and ev[j]["t_ms"] < b["t"] + width_ms:
            alive = ev[j]["alive"]
            j += 1
        b["alive"] = alive
        b["succ"] = 100.0 * b["ok"] / b["n"] if b["n"] else float("nan")
        b["p50"] = median(b["lat"])
    return bs


def recovery(bs, burst_t, base_p50, width_ms):
    """Seconds from burst_t until every later bucket has ≥ 99 % success and
    a median within 2× (or 10 ms, whichever is more: loopback medians are a
    fraction of a millisecond) of base_p50; None if never."""
    after = [b for b in bs if b["t"] + width_ms > burst_t and b["n"]]
    good = [b["succ"] >= 99 and b["p50"] <= max(2 * base_p50, base_p50 + 10) for b in after]
    if not after or not good[-1]:
        return None
    i = len(good)
    while i > 0 and good[i - 1]:
        i -= 1
    return max(0.0, (after[i]["t"] - burst_t) / 1000) if i < len(after) else None


CHURN = [("massive-failure", "20 % of the nodes crash at 60 s, then 50 % of the rest at 180 s"),
         ("flash-crowd", "as many nodes again join at 60 s"),
         ("churn1", "Poisson joins every 20 s, lifetimes of mean 4 min, for 540 s"),
         ("churn2", "Poisson joins every 10 s, lifetimes of mean 2 min, for 540 s")]


def speedup(R, run, name):
    """How much faster than its script the schedule ran: the end phase says
    (cfs-testbed prints it); older outputs: the script's end
    (tests/testbed/NAME.txt) over the run's end."""
    end_s = None
    for line in _read(os.path.join(HERE, name + ".txt")).splitlines():
        w = line.split("#")[0].split()
        if len(w) == 3 and w[0] == "at" and w[2] == "end":
            end_s = float(w[1])
    e = run.phase("end") or {}
    if e.get("speedup"):
        return float(e["speedup"])
    if end_s and e.get("t_ms") and not e.get("interrupted"):
        x = end_s * 1000 / e["t_ms"]
        return float(round(x)) if x >= 1.5 else round(x, 2)
    return 1.0 if R.mode == "full" else 10.0


def sec_churn(R):
    probs, rows, pngs, speeds = [], [], [], set()
    for name, what in CHURN:
        r = R.run("churn", name)
        t = r.trouble()
        if t or not r.gets(False):
            probs.append(t or f"{r.label}: no gets in ops.csv")
            rows.append([name, what, "–", "–", "–", "–", "–", "–", t or "no gets"])
            continue
        sp = speedup(R, r, name)
        speeds.add(sp)
        width = 10000 / sp      # 10 s of the script's clock
        bs, bu = buckets(r, width), bursts(r.events)
        with_gets = [b for b in bs if b["n"]]
        frac = len(with_gets) / len(bs)
        gets = r.gets(False)
        succ = 100.0 * sum(o["status"] == 0 for o in gets) / len(gets)
        if frac < 0.8:
            probs.append(f"{r.label}: gets in only {frac:.0%} of the {width / 1000:g} s buckets")
        if succ < 50:
            probs.append(f"{r.label}: {succ:.1f} % of gets succeeded")
        low = min(with_gets, key=lambda b: b["succ"])
        rec = "–"
        if name == "massive-failure":
            fails = [b for b in bursts(r.events, 1) if b[1] == "fail"]
            first = fails[0][0] if fails else float("inf")
            base = median([o["latency_ms"] for o in gets if o["status"] == 0 and o["t_ms"] < first])
            if len(fails) >= 2:
                x = recovery(bs, fails[1][0], base, width)
                rec = (f"{fmt(x * sp, 0)} s ({fmt(x, 1)} s run time)" if x is not None
                       else "not recovered by the end")
            else:
                rec = "no second failure burst in events.csv"
            R.accept.append(f"time to recover after the 50 % failure: {rec} (10 s buckets of the script's "
                            f"clock, speedup {sp:g}; ≥ 99 % success and median within 2× (or +10 ms) of the "
                            f"{fmt(base, 2)} ms before the first failure)")
        if name in ("churn1", "churn2"):
            R.accept.append(f"lowest success rate under {name}: {fmt(low['succ'])} % (per 10 s bucket of the "
                            f"script's clock; overall {fmt(succ, 2)} %)")
        rows.append([name, what, f"{sp:g}×", len(gets), fmt(succ, 2),
                     f"{fmt(low['succ'])} % at {low['t'] * sp / 1000:.0f} s",
                     fmt(median([o["latency_ms"] for o in gets if o["status"] == 0]), 2),
                     min(b["alive"] for b in bs), rec])
        dat = [[b["t"] * sp / 1000, b["succ"], b["p50"], b["alive"], b["n"]] for b in bs]
        marks = "\n".join(f"set arrow from {b[0] * sp / 1000},graph 0 to {b[0] * sp / 1000},graph 1 nohead "
                          "dt 2 lc rgb 'red'" for b in bu)
        pngs.append(R.plot(f"churn-{name}", f"""set multiplot layout 2,1
set lmargin 10; set rmargin 10; set xrange [0:*]
{marks}
set ylabel 'gets succeeded (%)'; set y2label 'live nodes'; set yrange [0:105]; set y2range [0:*]
set ytics nomirror; set y2tics; set key bottom left; set title '{name}: {what}'
plot 'churn-{name}.dat' u 1:2 w steps lw 2 t 'success per 10 s', '' u 1:4 axes x1y2 w steps dt 2 t 'live nodes'
unset title; unset y2label; unset y2tics; set ytics mirror; set yrange [*:*]; set logscale y
set xlabel "time on the script's clock (s; run {sp:g}x faster)"
set ylabel 'median get latency (ms)'
plot 'churn-{name}.dat' u 1:3 w steps lw 2 t 'median latency of successful gets'
unset multiplot""", {f"churn-{name}.dat": dat}))
    sp = "/".join(f"{x:g}" for x in sorted(speeds)) or "?"
    body = ("**Papers**: Tapestry (IEEE JSAC 2004, Figs. 19–22) routes to nodes and objects in an 830-node "
            "ring while 20 % fail and later 50 % join, and under two churn periods (Poisson joins every 20 s "
            "with 4 min lifetimes, every 10 s with 2 min); the success rate dips slightly and returns quickly "
            "to 100 %, and under churn it rarely dips below 100 %. SPLAY (NSDI 2009, Fig. 10) fails half of a "
            "1,500-node Pastry ring: almost 50 % of lookups fail, routing recovers in about 5 minutes, and "
            "delays fall as the population shrinks. **Here**: `cfs-testbed --churn SCRIPT --speedup X` with "
            "gets of random blocks at a fixed rate from random live nodes; the base ring never churns (as in "
            "Tapestry), no network model. Times are on the script's clock (tests/testbed/*.txt); the run went "
            f"{sp}× faster, so protocol timers (stabilisation, RPC timeouts) had {sp}× less schedule time to "
            "repair. Success rate and median latency per 10 s bucket of the script's clock; red dashes "
            "mark massive events. Recovery = from the second failure burst until every later bucket has "
            "≥ 99 % success and a median within 2× (or 10 ms, whichever is more) of the median before the first failure.\n\n")
    body += table(["schedule", "events", "speedup", "gets", "success %", "lowest bucket", "median ms",
                   "fewest live", "recovery after 50 % fail"], rows)
    body += "\n" + "\n".join(pngs)
    body += caption("Success rate, live nodes and median latency over time; paper: Tapestry dips briefly below "
                    "100 %, SPLAY recovers in ≈ 5 min after losing half the nodes; here: the same scripts "
                    f"run {sp}× faster.")
    judged = [r for r in rows if r[4] != "–"]
    if judged:
        lows = {r[0]: r[5] for r in judged}
        rec = next((r[8] for r in judged if r[0] == "massive-failure"), "–")
        under = [r[0] for r in judged if float(r[4]) < 95]
        body += shape(not under,
                      "Success overall: " + ", ".join(f"{r[0]} {r[4]} %" for r in judged)
                      + "; lowest 10 s bucket: " + "; ".join(f"{k} {v}" for k, v in lows.items())
                      + f"; recovery after the 50 % failure: {rec}. "
                      + ("It dips in the buckets of a massive event and comes back, as Tapestry's and "
                         "SPLAY's do." if not under else
                         f"Under {', '.join(under)} it stays below 95 %, where the papers stay near 100 %.")
                      + f" The runs went {sp}× faster than the scripts' clock, so every repair had that much "
                      "less time per event than in the papers.")
    else:
        body += shape(None, "no schedule ran.")
    R.section("churn", "Tapestry Figs. 19–22 / SPLAY Fig. 10: gets under churn", body)
    R.check("churn", probs, f"{sum(r[3] != '–' for r in rows)} schedules")


# ------------------------------------------------------------ CFS Fig. 6

def sec_fig6(R):
    probs, speeds, bsize, nblocks = [], {}, 8192, "?"
    for name in ("selection", "no-selection"):
        r = R.run("fig6", name)
        p = r.phase("file")
        t = r.trouble()
        if t or not p or not p.get("rows"):
            probs.append(t or f"{r.label}: no file phase")
            continue
        bsize, nblocks = p.get("block_size", bsize), p.get("blocks", nblocks)
        for x in p["rows"]:
            speeds.setdefault(x["window"], {}).setdefault(name, []).append(x["kbytes_per_s"])
            if not x["kbytes_per_s"] > 0 or x["failed"]:
                probs.append(f"{r.label}: window {x['window']}: {x['kbytes_per_s']} KB/s, {x['failed']} failed blocks")
    paper = {1: "≈ 20 (no s.s.)", 3: "≈ 50"}
    rows, dat = [], []
    for w in sorted(speeds):
        s, n = mean(speeds[w].get("selection", [])), mean(speeds[w].get("no-selection", []))
        rows.append([w, fmt(w * bsize / 1024, 0), fmt(s), fmt(n), paper.get(w, "")])
        dat.append([w * bsize / 1024, s, n])
    png = R.plot("fig6", """set xlabel 'prefetch window (KB)'; set ylabel 'download speed (KB/s)'
set yrange [0:*]; set xrange [0:*]
plot 'fig6.dat' u 1:2 w lp pt 7 t 'here: with server selection', '' u 1:3 w lp pt 5 t 'here: without', \\
     'paper.dat' u 1:2 w p pt 9 ps 2 t 'paper (text, no s.s.)'""",
                 {"fig6.dat": dat, "paper.dat": [[8, 20], [24, 50]]})
    body = (f"**Paper** ({PAPER_CFS} §7.1, Fig. 6): a 1 MB file of 8 KB blocks fetched on the Internet "
            "testbed with a range of prefetch windows, with and without server selection. A block fetch "
            "without server selection averages about 430 ms, hence about 20 KB/s fetching one block at a "
            "time; three blocks at a time give about 50 KB/s; large windows congest the client's link. "
            f"**Here**: `cfs-testbed --workload file`, {nblocks} blocks of {bsize} bytes from one "
            "random node per window under the network model (median RTT 130 ms, no bandwidth limit), "
            "server selection on (`nearest`) or off (`--ring-order`).\n\n")
    body += table(["window (blocks)", "window KB", "with selection KB/s", "without KB/s", "paper KB/s"], rows)
    body += "\n" + png + caption("Download speed against prefetch window; paper: ≈ 20 KB/s at one block, "
                                 "≈ 50 KB/s at three (no server selection); here: the network model.")
    if len(dat) >= 2:
        sel_up = dat[-1][1] > dat[0][1]
        sel_better = all(d[1] >= d[2] * 0.95 for d in dat if d[1] == d[1] and d[2] == d[2])
        body += shape(sel_up and sel_better,
                      f"Speed grows with the window ({fmt(dat[0][1])} KB/s at one block, {fmt(dat[-1][1])} at "
                      f"{fmt(dat[-1][0], 0)} KB, with server selection) and selection is "
                      f"{'as fast or faster at every window' if sel_better else 'not faster at every window'}, "
                      "as in the paper. The paper's curve bends down at large windows because its clients' "
                      "links were congested; the model has no bandwidth limit, so it does not bend here.")
    else:
        body += shape(None, "fewer than two windows ran.")
    R.section("fig6", "CFS Fig. 6: download speed and prefetch", body)
    R.check("fig6", probs, f"{len(rows)} windows")


# ------------------------------------------------------------ footprint, preface, output

def sec_scale(R):
    """Footprint: the largest rings run (fig9's cfs-ring builds, every
    cfs-testbed build, and eval.sh's scale run of whole DHash nodes)."""
    probs, rows = [], []
    if R.fig9:
        n = max(R.fig9)
        R.accept.append(f"largest cfs-ring: {n} nodes, {fmt(R.fig9[n][2])} KiB per node")
    runs = R.runs("scale", "")
    if not runs:
        probs.append("scale: no runs")
    capped = _read(os.path.join(R.out, "scale", "capped.txt")).strip()
    for r in runs:
        b, s = r.phase("build"), get_stats(r)
        t = r.trouble()
        if t or not b or not b.get("converged"):
            probs.append(t or f"{r.label}: " + ("no build phase" if not b else "ring did not converge"))
        if b:
            rows.append([r.label, b.get("asked", "?"), b["nodes"], fmt(b["seconds"]),
                         "yes" if b.get("converged") else "**no**",
                         fmt(b["kib_per_node"]), s["gets"], fmt(s["succ"]), fmt(s["p50"], 2), fmt(s["p99"], 2),
                         fmt((r.phase("end") or {}).get("rss_kib", float("nan")) / 1024)])
    best = None
    for exp in TESTBED_RUNS:
        for r in R.runs(exp, ""):
            b = r.phase("build")
            if b and (best is None or b["nodes"] > best[1]["nodes"]):
                best = (r, b)
    if best:
        r, b = best
        e = r.phase("end") or {}
        rss = e.get("rss_kib")
        per = f", {fmt(rss / e['alive'])} KiB per live node" if rss and e.get("alive") else ""
        R.accept.append(f"largest cfs-testbed ring ({r.label}): {b['nodes']} nodes, {fmt(b['kib_per_node'])} "
                        f"KiB per node after the build; end RSS {fmt(rss / 1024 if rss else None)} MiB{per}")
    body = ("**Paper**: CFS ran its controlled experiments as many servers on one machine (§7.2) and puts a "
            "virtual server's routing and accounting state under 10 KB (§7.2.4); SPLAY stresses a small "
            "footprint per node. **Here**: the largest ring of whole DHash nodes that eval.sh builds in one "
            "process (`cfs-testbed`, gets at a rate, no network model); memory per node is the process's RSS "
            "after the build over the nodes. The largest cfs-ring is in the Fig. 9 table.\n\n")
    if capped:
        body += f"The ring asked for was smaller on this machine: {capped}.\n\n"
    index = _read(os.path.join(R.out, "scale", "index.txt")).strip()
    if index:
        body += (f"The stores' indexes were kept in memory (`--index-in-memory`, docs/TESTBED.md): {index}. "
                 "Memory per node includes them.\n\n")
    body += missing_note(probs) + table(["run", "asked", "nodes", "build s", "converged", "KiB per node", "gets",
                                         "success %", "p50 ms", "p99 ms", "end RSS MiB"], rows)
    if rows:
        body += shape("none", "CFS ran its controlled experiments as many servers on one machine, "
                      "as these rings do; the table is this implementation's footprint.")
    R.section("scale", "Scale: the largest ring of whole nodes", body)
    R.check("scale", probs, f"{len(rows)} runs")


def netmodels(R):
    seen = {}
    for root, _, files in os.walk(R.out):
        for f in files:
            if f.endswith(".err"):
                for line in _read(os.path.join(root, f)).splitlines():
                    if "network model:" in line:
                        seen.setdefault(line.split("network model:", 1)[1].strip(), set()).add(
                            os.path.basename(root))
    return seen


def write_doc(R):
    try:
        uname = subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
    except OSError:
        uname = platform.platform()
    nm = netmodels(R)
    lines = ["# CFS — evaluation", "",
             f"Produced by `make eval{'-quick' if R.mode == 'quick' else ''}` (tests/testbed/eval.sh, mode "
             f"{R.mode}) on this machine, {time.strftime('%Y-%m-%d')}: `{uname}`, {os.cpu_count()} CPUs. "
             "Every node has its own loopback address (127.x.y.z), many per process; `cfs-ring` runs Chord alone, `cfs-testbed` whole "
             "DHash nodes. The raw output of every run (JSON phases, stderr, ops.csv, events.csv) stays in the "
             "output folder; tests/testbed/eval_report.py turns it into this page.", ""]
    if R.mode == "quick":
        lines += ["**Quick mode:** rings of 16 to 128 nodes, short runs and churn schedules sped up 25×. "
                  "The numbers below show that each experiment runs and gives sane output; they are not "
                  "the papers' experiments. `make eval` runs those (about 45 minutes).", ""]
    if nm:
        lines.append("Network model (wide-area delays added to every send, from the runs' stderr):")
        lines += [f"- {d} ({', '.join(sorted(e))})" for d, e in sorted(nm.items())]
        lines.append("")
    lines += ["## Acceptance figures", ""] + [f"- {a}" for a in R.accept] + ["", "## Contents", ""]
    lines += [f"- [{t}](#{a})" for a, t, _ in R.sections] + ["- [Sanity checks](#checks)", ""]
    for a, t, body in R.sections:
        lines += [f'<a id="{a}"></a>', f"## {t}", "", body]
    lines += ['<a id="checks"></a>', "## Sanity checks", ""]
    lines += [check_line(c) for c in R.checks]
    with open(R.doc, "w") as f:
        f.write("\n".join(lines) + "\n")


def check_line(c):
    name, problems, summary = c
    return f"- {name}: ok ({summary})" if not problems else f"- {name}: FAIL: " + "; ".join(problems)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--mode", choices=("full", "quick"), default="full")
    ap.add_argument("--doc")
    ap.add_argument("--png-dir")
    args = ap.parse_args()
    if not os.path.isdir(args.out):
        sys.exit(f"eval_report: no such folder {args.out}")
    R = Report(args)
    for sec in (sec_fig9, sec_fig13, sec_fig10, sec_fig12, sec_fig11, sec_dhashpp, sec_opendht,
                sec_coded, sec_avail, sec_churn, sec_fig6, sec_scale):
        try:
            sec(R)
        except Exception as e:  # one broken section must not cost the rest of the report
            name = sec.__name__[4:]
            R.section(name, f"{name}: report failed", f"The report for this section failed: `{e!r}`.\n")
            R.check(name, [f"report error: {e!r}"], "")
    if R.plot_errors:
        R.check("plots", R.plot_errors, "")
    write_doc(R)
    print(f"eval report: {R.doc}, plots in {R.png_dir}")
    print("sanity checks" + (" (informational with --doc):" if args.doc else ":"))
    for c in R.checks:
        print("  " + check_line(c)[2:])
    print("acceptance figures:")
    for a in R.accept:
        print("  " + a)
    failed = [c[0] for c in R.checks if c[1]]
    if failed and not args.doc:
        print(f"eval report: sanity checks FAILED: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
