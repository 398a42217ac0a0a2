#!/usr/bin/env python3
"""The cairn tool's man page and bash completion against the tool itself:
every verb and every option that `cairn --help` and `cairn VERB --help`
print must be in tools/cairn/cairn.1 and offered by tools/cairn/cairn.bash
(for its verb), and the completion must complete verbs, options and
--layout's values. Fails naming what is missing."""
import argparse
import os
import re
import subprocess
import sys

p = argparse.ArgumentParser()
p.add_argument("--cairn", required=True)
p.add_argument("--man", required=True)
p.add_argument("--completion", required=True)
a = p.parse_args()

env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def help_of(*verb):
    out = subprocess.run([a.cairn, *verb, "--help"], capture_output=True, text=True, env=env, timeout=120)
    if out.returncode != 0:
        sys.exit(f"FAIL: cairn {' '.join(verb)} --help exited {out.returncode}: {out.stderr}")
    return out.stdout


def options(text):
    """Options of a help text's Options: section ("  -D,--decomposition  ...")."""
    opts = set()
    section = False
    for line in text.splitlines():
        if line.strip().endswith(":") and not line.startswith(" "):
            section = line.startswith("Options")
            continue
        m = re.match(r"^  (-[^ ]+)", line) if section else None
        if m:
            opts.update(o for o in m.group(1).split(",") if o.startswith("-"))
    return opts


top = help_of()
verbs = re.findall(r"^  (\w+)\s", top.split("Subcommands:")[1].split("\n\n")[0], re.M)
if set(verbs) != {"ls", "cat", "verify", "diff", "convert", "repair", "profile", "steps"}:
    sys.exit(f"FAIL: unexpected verbs in cairn --help: {verbs}")

man = open(a.man).read()
man_plain = man.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "")
completion = open(a.completion).read()
problems = []


def in_man(opt):
    return re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(opt), man_plain) is not None


def completion_opts(verb):
    m = re.search(r'^\s*%s\) opts="([^"]*)"' % (re.escape(verb) if verb else '""'), completion, re.M)
    return set(m.group(1).split()) if m else set()


for opt in options(top):
    if not in_man(opt):
        problems.append(f"man page lacks the option {opt}")
    if opt not in completion_opts(""):
        problems.append(f"completion lacks the option {opt}")
for verb in verbs:
    if not re.search(r"^\.B cairn %s$" % verb, man, re.M) or not re.search(r"^\.B %s$" % verb, man, re.M):
        problems.append(f"man page lacks the verb {verb} (in SYNOPSIS and VERBS)")
    if verb not in completion_opts(""):
        problems.append(f"completion does not offer the verb {verb}")
    for opt in options(help_of(verb)):
        if not in_man(opt):
            problems.append(f"man page lacks {verb}'s option {opt}")
        if opt not in completion_opts(verb):
            problems.append(f"completion lacks {verb}'s option {opt}")


def complete(*words):
    """COMPREPLY of the completion for the command line `words` (last one being completed)."""
    script = (f"source {a.completion}; COMP_WORDS=({' '.join(repr(w) for w in words)}); "
              f"COMP_CWORD={len(words) - 1}; _cairn; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    return set(out.stdout.split())


for words, want in [(("cairn", "ve"), {"verify"}), (("cairn", "diff", "--a"), {"--abs"}),
                    (("cairn", "convert", "x", "y", "--layout", "c"), {"container"}),
                    (("cairn", "ls", "-"), {"-D", "--json", "--step"}),
                    (("cairn", "pro"), {"profile"}), (("cairn", "profile", "--j"), {"--json"}),
                    (("cairn", "st"), {"steps"}), (("cairn", "steps", "--j"), {"--json"})]:
    got = complete(*words)
    if not want <= got:
        problems.append(f"completing {' '.join(words)!r} gave {sorted(got)}, missing {sorted(want - got)}")

if problems:
    print("FAIL:\n  " + "\n  ".join(problems))
    sys.exit(1)
print(f"ok: {len(verbs)} verbs and their options in the man page and the completion")
