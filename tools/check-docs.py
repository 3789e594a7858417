#!/usr/bin/env python3
"""Docs that cannot drift: the options and settings of the installed
programs, as the code defines them, against their --help, their man pages
and the sample config.

    tools/check-docs.py BINDIR       check (run by tools/lint.sh, make lint)
    tools/check-docs.py --programs B print the programs to build into B/bin

Everything is read from the sources, so that a new option or setting
without its docs fails here:
  - the programs are the Makefile's PROGRAMS, their sources the object
    list of each one's link rule; the options are every `struct option`
    table in those sources (cfsctl's commands have tables of their own);
  - cfsd's config keys are the option table its config reader walks, less
    the options it refuses there; the client config keys are the words
    client/target.c's config reader compares a line with.
For each program: every long option is in --help and is an entry (a .TP
tag) of its man page; every option that --help lists, and that the man
page's entries and SYNOPSIS name, exists; a default stated by both --help
and the man page is the same; a bound the program prints when refusing a
value ("from 1 to 64", "up to N", "N..M") is the one --help and the man
page state. Every cfsd config key has a line in tools/cfsd.conf and an
entry in cfsd.conf(5), each stating the default cfsd --help states if it
states one; neither names a key that does not exist, and cfsd --check
accepts the sample with every line uncommented. Every client
config key is in cfs-client.conf(5), and its example uses no other.

One line per problem: "check-docs: PROGRAM: --OPTION: what is wrong".
Exit 1 if there was any.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
problems = []


def problem(who, what, msg):
    problems.append(f"check-docs: {who}: {what}: {msg}")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


# ------------------------------------------------------------ the Makefile

def makefile_vars(text):
    """The Makefile's `NAME := words` assignments (continuations joined,
    += appended), for the program and source lists."""
    text = re.sub(r"\\\n", " ", text)
    out = {}
    for m in re.finditer(r"^([A-Z_]+)\s*(:=|\+=|\?=)\s*(.*)$", text, re.M):
        name, op, val = m.group(1), m.group(2), m.group(3).split("#")[0].split()
        out[name] = (out.get(name, []) + val) if op == "+=" else val
    return out, text


def expand(words, vars_, depth=0):
    out = []
    for w in words:
        m = re.fullmatch(r"\$\(([A-Z_]+)\)", w)
        if m and depth < 5:
            out += expand(vars_.get(m.group(1), []), vars_, depth + 1)
        elif m := re.fullmatch(r"\$\(wildcard ([^)]*)\)", w):
            out += sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, m.group(1))))
        else:
            out.append(w)
    return out


def programs():
    """{name: [source files]} for every program of PROGRAMS."""
    vars_, text = makefile_vars(read("Makefile"))
    m = re.search(r"^PROGRAMS\s*:=\s*\$\(addprefix \$\(B\)/bin/,([^)]*)\)", text, re.M)
    names = m.group(1).split() if m else [p.rsplit("/", 1)[-1] for p in
                                          expand(vars_.get("PROGRAMS", []), vars_)]
    progs = {}
    for name in names:
        srcs = []
        for m in re.finditer(r"^\$\(B\)/bin/" + re.escape(name) + r":[^\n]*?\$\(call obj,([^)]*\)?)\)",
                             text, re.M):
            srcs += expand(m.group(1).split(), vars_)
        # a program linked by a static pattern rule: its one file is
        # FOLDER/cfs_NAME.c (cfs-mount: cfs-fuse/cfs_mount.c)
        if not srcs and name.startswith("cfs-"):
            srcs = sorted(os.path.relpath(p, ROOT) for p in
                          glob.glob(os.path.join(ROOT, "*", "cfs_" + name[4:].replace("-", "_") + ".c")))
        progs[name] = [s for s in srcs if s.endswith(".c")]
    return progs


# ------------------------------------------------------------ C sources

def strip_c_comments(src):
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)


def option_tables(src):
    """[(table name, [(long name, has_arg, val)])] of every struct option
    table (several functions may each have an `opts`)."""
    tables = []
    for m in re.finditer(r"struct option\s+(\w+)\s*\[\s*\w*\s*\]\s*=\s*\{(.*?)\n\s*\};", src, re.S):
        rows = re.findall(r'\{\s*"([\w-]+)"\s*,\s*(\w+)\s*,\s*\w+\s*,\s*([^}]+?)\s*\}', m.group(2))
        tables.append((m.group(1), rows))
    return tables


def code_options(srcs):
    """{long name: has_arg} over every option table of the sources."""
    opts = {}
    for s in srcs:
        for _, rows in option_tables(strip_c_comments(read(s))):
            for name, has_arg, _ in rows:
                opts[name] = has_arg
    return opts


def function_body(src, name):
    m = re.search(r"^[^\n;]*\b" + name + r"\s*\([^;{]*\)\s*\{", src, re.M)
    if not m:
        return None
    depth, i = 0, m.end() - 1
    for j in range(i, len(src)):
        depth += {"{": 1, "}": -1}.get(src[j], 0)
        if depth == 0:
            return src[i:j + 1]
    return None


def cfsd_config_keys():
    """The settings cfsd's config file takes: the option table read_config
    walks, less the option values it refuses as "unknown setting"."""
    src = strip_c_comments(read("cfsd/config.c"))
    body = function_body(src, "cfsd__read_config")
    if body is None:
        problem("cfsd", "config", "no cfsd__read_config() in cfsd/config.c to take the config keys from")
        return set()
    table = re.search(r"const struct option \*\w+\s*=\s*(\w+)\s*;", body)
    refused = re.search(r"if\s*\(!\s*\w+->name\s*\|\|(.*?)\)\s*\n\s*bad_usage", body, re.S)
    rows = dict(option_tables(src)).get(table.group(1) if table else "", [])
    if not rows or not refused:
        problem("cfsd", "config", "cannot find the option table and the refused options in read_config()")
        return set()
    vals = set(re.findall(r"->val\s*==\s*([\w']+)", refused.group(1)))
    return {name for name, _, val in rows if val not in vals}


def client_config_keys():
    """The words client/target.c's read_config() takes a line to start with."""
    src = strip_c_comments(read("client/target.c"))
    body = function_body(src, "read_config") or ""
    keys = set(re.findall(r'str(?:n?cmp|ncasecmp)\s*\(\s*\w+\s*,\s*"([\w-]+)"', body))
    if not keys:
        problem("client.conf", "config", "no setting found in client/target.c's read_config()")
    return keys


# ------------------------------------------------------------ man pages

def roff_args(s):
    return [a[1:-1] if a.startswith('"') else a for a in re.findall(r'"[^"]*"|\S+', s)]


def roff_text(line):
    """One roff line as plain text: macros' arguments joined, escapes gone."""
    if line.startswith((".", "'")):
        m = re.match(r"[.'](\w+)\s*(.*)", line)
        if not m:
            return ""
        mac, rest = m.group(1), m.group(2)
        if mac in ("B", "I", "SM", "SB"):
            line = " ".join(roff_args(rest))
        elif re.fullmatch(r"[BIR]{2}", mac):
            line = "".join(roff_args(rest))
        elif mac in ("SH", "SS", "TP", "PP", "P", "LP", "br", "nf", "fi", "RS", "RE", "TH", "IP"):
            line = " ".join(roff_args(rest)) if mac in ("SH", "SS", "IP") else ""
        else:
            return ""
    line = re.sub(r"\\f(\(..|\[[^]]*\]|.)", "", line)
    line = line.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")
    line = re.sub(r"\\\((em|en)", "—", line)
    line = re.sub(r"\\\(bv", "|", line)
    line = re.sub(r"\\\(\+-", "±", line)
    line = re.sub(r"\\\(..", "", line)
    line = line.replace("\\ ", " ")
    return line


class ManPage:
    """A man page's entries (.TP tag, body) and its SYNOPSIS, as text."""

    def __init__(self, path):
        self.path = path
        self.entries = []  # (section, tag, body)
        self.synopsis = ""
        section, tag, body, want_tag = "", None, [], False
        for raw in read(path).splitlines():
            is_break = re.match(r"[.'](SH|SS|TP|PP|P|LP|IP)\b", raw)
            if is_break and tag is not None:
                self.entries.append((section, tag, " ".join(body)))
                tag, body = None, []
            if raw.startswith(".SH"):
                section = roff_text(raw).strip().upper()
                continue
            if raw.startswith(".TP"):
                want_tag = True
                continue
            t = roff_text(raw)
            if want_tag:
                tag, want_tag = t, False
            elif tag is not None:
                body.append(t)
            if section == "SYNOPSIS":
                self.synopsis += t + " "
        if tag is not None:
            self.entries.append((section, tag, " ".join(body)))

    def entry(self, opt):
        """The body of the entry whose tag names --opt, or None."""
        for _, tag, body in self.entries:
            if opt_re(opt).search(tag):
                return tag + " " + body
        return None

    def tag_options(self):
        return {o for _, tag, _ in self.entries for o in long_opts(tag)}


def opt_re(name):
    return re.compile(r"(?<![\w-])--" + re.escape(name) + r"(?![\w-])")


def long_opts(text):
    return set(re.findall(r"(?<![\w-])--([a-z][\w-]*[a-z0-9])", text))


# ------------------------------------------------------------ --help

def help_entries(text):
    """{long option: its text} of --help's option lines (an option at most
    8 columns in, then the lines indented further below it)."""
    out, cur, indent = {}, None, 0
    for line in text.splitlines():
        m = re.match(r"( {1,8})(-\w, )?--([\w-]+)", line)
        if m:
            cur, indent = m.group(3), len(m.group(1))
            out[cur] = line.strip()
        elif cur and line.strip() and len(line) - len(line.lstrip()) > indent:
            out[cur] += " " + line.strip()
        else:
            cur = None
    return out


# ------------------------------------------------------------ defaults, bounds

VALUE = r"(-?\d[\d,]*(?:\.\d+)?|\S*[$/:=,]\S*|[a-z][\w-]*)"


def defaults(text):
    """The values a text states as defaults, in order: "default N",
    "(default: X)", "X (the default)", "X (default)". Words without a digit
    or a sign of a literal ($ / : , =) are left out: "default a tenth of"
    states a rule, not a value."""
    text = re.sub(r"\s+", " ", text)
    found = []
    for m in re.finditer(r"\b[Dd]efault(?: is)?:? " + VALUE, text):
        found.append((m.start(), m.group(1)))
    for m in re.finditer(r"(\S+) \((?:[^()]*?, )?(?:the )?default\)", text):
        found.append((m.start(), m.group(1)))
    out = []
    for _, v in sorted(found):
        v = v.rstrip(".,;)")
        v = v.rstrip(":") or v  # "default 0: off", but "default ::"
        if re.match(r"-?\d", v):
            v = v.replace(",", "")
        if re.search(r"[\d$/:=,]", v) or re.fullmatch(r"[a-z]+", v) and v in LITERAL_WORDS:
            out.append(v)
    return out


# Words that, after "default", name a value rather than start a phrase.
LITERAL_WORDS = {"auto", "off", "on", "client", "member", "path", "last", "none", "info", "warn",
                 "error", "debug", "cfsd", "iterative", "recursive", "true", "false"}


def bounds(text):
    """Upper bounds a text states for a value: "at most N", "up to N",
    "N..M", "N to M" (with digits on both sides)."""
    text = re.sub(r"\s+", " ", text)
    out = set()
    for m in re.finditer(r"\b(?:at most|up to) (\d[\d,]*)\b(?! ?%)", text):
        out.add(int(m.group(1).replace(",", "")))
    for m in re.finditer(r"\b(\d[\d,]*)(?: ?\.\. ?| to )(\d[\d,]*)\b", text):
        out.add(int(m.group(2).replace(",", "")))
    return out


def refused_bound(binary, opt, operands):
    """The upper bound the program prints when refusing a value of --opt,
    or None when it prints none (the option takes no number)."""
    try:
        p = subprocess.run([binary, "--" + opt, "not-a-number"] + operands, capture_output=True,
                           text=True, timeout=10, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None
    if p.returncode != 2:
        return None
    m = re.search(r"--" + re.escape(opt) + r" wants [^\n]*?(?:from -?\d+ to|up to|\d+\.\.)\s*(\d+)",
                  p.stderr)
    return int(m.group(1)) if m else None


# ------------------------------------------------------------ the checks

# The man page of a program is docs/man/NAME.SECTION; the operands that
# get a program past its argument count to the value check of an option.
OPERANDS = {"cfs-mount": ["a" * 52, "/nonexistent"], "cfs-publish": ["/nonexistent"],
            "cfs-fsck": ["a" * 52], "cfs-cat": ["a" * 52, "/x"], "cfs-get": ["a" * 52, "/nonexistent"]}


def man_path(name):
    for sec in ("1", "8"):
        p = f"docs/man/{name}.{sec}"
        if os.path.exists(os.path.join(ROOT, p)):
            return p
    return None


def check_program(bindir, name, srcs):
    opts = code_options(srcs)
    if not opts:
        problem(name, "options", f"no struct option table found in {' '.join(srcs) or 'its sources'}")
        return
    binary = os.path.join(bindir, name)
    p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10,
                       stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        problem(name, "--help", f"exits {p.returncode}, not 0")
    help_text = p.stdout
    helps = help_entries(help_text)
    mp = man_path(name)
    if not mp:
        problem(name, "man page", f"no docs/man/{name}.1 or .8")
        return
    man = ManPage(mp)
    tagged = man.tag_options()

    for opt in sorted(opts):
        if not opt_re(opt).search(help_text):
            problem(name, "--" + opt, "accepted by the code, missing from --help")
        if opt not in tagged:
            problem(name, "--" + opt, f"accepted by the code, no entry in {mp}")
    for opt in sorted(set(helps) - set(opts)):
        problem(name, "--" + opt, "in --help, but the code has no such option")
    for opt in sorted((tagged | long_opts(man.synopsis)) - set(opts)):
        problem(name, "--" + opt, f"in {mp}, but the code has no such option")

    for opt in sorted(opts):
        h, m = helps.get(opt), man.entry(opt)
        if h is None or m is None:
            continue
        hd, md = defaults(h), defaults(m)
        if hd and md and (hd[0] != md[0] or not set(hd) <= set(md)):
            problem(name, "--" + opt, f"--help says default {', '.join(hd)}, {mp} says {', '.join(md)}")
        if opts[opt] != "required_argument":
            continue
        hb, mb = bounds(h), bounds(m)
        if hb and mb and max(hb) != max(mb):
            problem(name, "--" + opt, f"--help says at most {max(hb)}, {mp} says {max(mb)}")
        if hb or mb:
            code = refused_bound(binary, opt, OPERANDS.get(name, []))
            for where, b in (("--help", hb), (mp, mb)):
                if code is not None and b and code not in b:
                    problem(name, "--" + opt, f"{where} says at most {max(b)}, the program takes up to {code}")


def sample_comments(sample):
    """{key: the comment lines above its "#key = value" line in the sample}."""
    out, block, after_key = {}, [], False
    for ln in sample.splitlines():
        m = re.match(r"#?([a-z][\w-]*)\s*=", ln)
        if m:
            out[m.group(1)] = " ".join(block)
        elif ln.startswith("#"):
            if after_key:
                block = []
            block.append(ln.lstrip("# "))
        else:
            block = []
        after_key = bool(m)
    return out


def check_cfsd_config(bindir):
    keys = cfsd_config_keys()
    if not keys:
        return
    helps = help_entries(subprocess.run([os.path.join(bindir, "cfsd"), "--help"], capture_output=True,
                                        text=True, timeout=10, stdin=subprocess.DEVNULL).stdout)
    sample = read("tools/cfsd.conf")
    # A setting's line is "name = value", or "#name = value" (no blank
    # after the '#': "# name = ..." is prose).
    set_lines = dict(re.findall(r"^#?([a-z][\w-]*)\s*=\s*(.*?)\s*$", sample, re.M))
    for k in sorted(keys):
        if k not in set_lines:
            problem("tools/cfsd.conf", k, "a cfsd setting with no line in the sample config")
    for k in sorted(set(set_lines) - keys):
        problem("tools/cfsd.conf", k, "not a setting cfsd's config file takes")
    # Each default cfsd --help states is the one said above the key's line
    # (a comment may cover two keys, hence no more than that).
    for k, text in sorted(sample_comments(sample).items()):
        hd, sd = defaults(helps.get(k, "")), defaults(text)
        if hd and sd and not set(hd) <= set(sd):
            problem("tools/cfsd.conf", k, f"cfsd --help says default {', '.join(hd)}, "
                    f"the sample config says {', '.join(sd)}")

    man = ManPage("docs/man/cfsd.conf.5")
    tags = {m for _, tag, _ in man.entries for m in re.findall(r"^([a-z][\w-]*)(?:\s*=|$)", tag.strip())}
    for k in sorted(keys - tags):
        problem("cfsd.conf.5", k, "a cfsd setting with no entry in docs/man/cfsd.conf.5")
    for k in sorted(tags - keys):
        problem("cfsd.conf.5", k, "an entry for a setting cfsd's config file does not take")
    for _, tag, body in man.entries:
        k = tag.split("=")[0].strip()
        hd, md = defaults(helps.get(k, "")), defaults(body)
        if k in keys and hd and md and (hd[0] != md[0] or not set(hd) <= set(md)):
            problem("cfsd.conf.5", k, f"cfsd --help says default {', '.join(hd)}, "
                    f"docs/man/cfsd.conf.5 says {', '.join(md)}")

    # The sample's values are ones cfsd takes: every line uncommented.
    lines = [re.sub(r"^#([a-z][\w-]*\s*=)", r"\1", ln) for ln in sample.splitlines()]
    with tempfile.TemporaryDirectory() as d:
        conf = os.path.join(d, "cfsd.conf")
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        p = subprocess.run([os.path.join(bindir, "cfsd"), "--config", conf, "--data", d, "--check"],
                           capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            why = (p.stderr.strip().splitlines() or ["no message"])[0]
            problem("tools/cfsd.conf", "values", f"uncommented, cfsd --check refuses it: {why}")


def check_client_config():
    keys = client_config_keys()
    mp = "docs/man/cfs-client.conf.5"
    src = read(mp)
    for k in sorted(keys):
        if not re.search(r"^\.(B|BI|BR)\s+\"?" + re.escape(k) + r"\b", src, re.M):
            problem("cfs-client.conf.5", k, f"a client setting not documented in {mp}")
    # The example's lines (between .nf and .fi) name only real settings.
    for block in re.findall(r"^\.nf\n(.*?)^\.fi", src, re.M | re.S):
        for ln in block.splitlines():
            w = roff_text(ln).strip().split()
            if w and not w[0].startswith("#") and w[0] not in keys:
                problem("cfs-client.conf.5", w[0], "the example uses a setting the client does not take")


def main(argv):
    if len(argv) == 3 and argv[1] == "--programs":
        print(" ".join(f"{argv[2]}/bin/{n}" for n in programs()))
        return 0
    if len(argv) != 2:
        print("usage: check-docs.py BINDIR | --programs B", file=sys.stderr)
        return 2
    bindir = argv[1]
    progs = programs()
    if not progs:
        problem("Makefile", "PROGRAMS", "no programs found")
    for name, srcs in progs.items():
        check_program(bindir, name, srcs)
    check_cfsd_config(bindir)
    check_client_config()
    for line in problems:
        print(line)
    if problems:
        n = len(problems)
        print(f"check-docs: {n} problem{'s' if n > 1 else ''}: the docs and the code disagree")
        return 1
    print(f"check-docs: {', '.join(progs)}: options, defaults and config keys documented")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
