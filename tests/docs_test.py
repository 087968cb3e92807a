#!/usr/bin/env python3
"""docs_test.py - the documents in docs/ against the program and library.

Checks, each a counted case:
  - console examples: in every ```console block of docs/*.md, each line
    "$ COMMAND" is run with bash (einc on PATH, in a directory holding the
    fixtures a.npy and b.npy that docs/cli.md describes) and its output
    (stdout and stderr) compared with the lines after it. A line "..."
    stands for any lines, "..." in a line for any text; a last line
    "[exit N]" is the expected exit status (else 0). A "$ " line in any
    other block fails: it would not be checked. Blocks tagged
    "console needs-cuda-build" are skipped in a build without CUDA.
  - C examples: every ```c block is a program, compiled with -Wall -Wextra
    -Werror against include/ein.h and the built libein, run, and compared
    with the ```output block after it. Every ```c declarations block is
    compiled after #include <ein.h>, so a prototype that differs from the
    header's fails.
  - docs/c-api.md has every EIN_API function of ein.h in a declarations
    block and in a table, and every ein_status value.
  - docs/cli.md and the man page docs/einc.1 against --help: the same
    commands as `einc --help`; each command's usage block verbatim; every
    option of `einc COMMAND --help` documented for that command (or among
    the common options), and nothing documented that --help does not list.
    Each failure names the file, the command and the option.

usage: docs_test.py --src DIR --einc PATH --cc CC --libdir DIR
                    [--dlpack-include DIR] [--have-cuda 0|1] --work DIR
EINC_TEST_CFLAGS: flags the C examples need too (a sanitizer).
"""
import argparse
import difflib
import os
import re
import shutil
import struct
import subprocess
import sys

passed = failed = skipped = 0


def ok(name):
    global passed
    passed += 1
    print(f"ok   {name}")


def fail(name, detail=""):
    global failed
    failed += 1
    print(f"FAIL {name}")
    for line in detail.rstrip("\n").splitlines():
        print(f"     {line}")


def check(name, problems):
    """One case: passes when `problems` (a list of messages) is empty."""
    if problems:
        fail(name, "\n".join(problems))
    else:
        ok(name)


# --- reading the documents --------------------------------------------------

def parse_fences(lines):
    """The fenced blocks among lines: (info words, line number, lines)."""
    blocks, block = [], None
    for number, line in enumerate(lines, 1):
        if block is None and line.startswith("```"):
            block = (line[3:].split(), number, [])
        elif block is not None and line.startswith("```"):
            blocks.append(block)
            block = None
        elif block is not None:
            block[2].append(line)
    return blocks


def fences(path):
    with open(path, encoding="utf-8") as f:
        return parse_fences(f.read().splitlines())


def sections(path, level="## "):
    """Heading text -> the lines under it, up to the next heading of the
    same level."""
    out, name = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith(level):
                name = line[len(level):].strip()
                out[name] = []
            elif name is not None:
                out[name].append(line.rstrip("\n"))
    return out


OPTION = re.compile(r"(?<![\w-])(--(?:[A-Za-z][\w-]*)?|-[A-Za-z][\w-]*)")


def table_options(lines):
    """Options in the first column of the section's first table whose
    header is 'option'."""
    opts, in_table = set(), False
    for line in lines:
        if re.match(r"^\| *option *\|", line):
            in_table = True
        elif in_table and line.startswith("|"):
            first = line.split("|")[1]
            for span in re.findall(r"`([^`]*)`", first):
                m = OPTION.match(span)
                if m:
                    opts.add(m.group(1))
        elif in_table:
            break
    return opts


# --- the program's own word -------------------------------------------------

def run_einc(einc, *args):
    return subprocess.run([einc, *args], capture_output=True, text=True,
                          timeout=60).stdout


def help_commands(einc):
    text = run_einc(einc, "--help")
    block = text.split("commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines() if line.strip()]


def help_options(text):
    """The options a --help lists: option lines ('  -o, --output F  ...')
    and the shared ones it refers to ('(see einc check --help for -D, ...)')."""
    opts = set()
    for line in text.splitlines():
        m = re.match(r"^  \(see einc [\w-]+ --help for (.*)\)$", line)
        if m:
            opts.update(o.strip() for o in m.group(1).split(","))
        elif re.match(r"^  -\S", line):
            head = re.split(r"\s{2,}", line.strip())[0]
            opts.update(OPTION.findall(head))
    return opts


def usage_block(text):
    lines = text.split("\n\n", 1)[0].splitlines()
    return [line.rstrip() for line in lines]


# --- console examples -------------------------------------------------------

def write_npy(path, shape, values, descr="<f4", fmt="f"):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join(f"{s}, " for s in shape) if len(shape) != 1
        else f"{shape[0]},")
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode() + struct.pack(f"<{len(values)}{fmt}",
                                              *values))


def expected_pattern(lines):
    parts = []
    for line in lines:
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(r"[^\n]*?".join(map(re.escape, line.split("...")))
                         + r"\n")
    return re.compile("".join(parts))


def examples(block_lines):
    """(command, expected lines, exit status) for each '$ ' line."""
    out = []
    for line in block_lines:
        if line.startswith("$ "):
            out.append([line[2:], [], 0])
        elif out:
            out[-1][1].append(line.rstrip())
    for ex in out:
        m = ex[1] and re.fullmatch(r"\[exit (\d+)\]", ex[1][-1])
        if m:
            ex[1].pop()
            ex[2] = int(m.group(1))
    return out


def run_console(where, command, expected, status, env, work):
    r = subprocess.run(["bash", "-c", command], cwd=work, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    got = "".join(line.rstrip() + "\n" for line in r.stdout.splitlines())
    problems = []
    if not expected_pattern(expected).fullmatch(got):
        diff = difflib.unified_diff(expected, got.splitlines(), "documented",
                                    "einc printed", lineterm="")
        problems.append("output differs:\n" + "\n".join(diff))
    if r.returncode != status:
        problems.append(f"exit status {r.returncode}, documented {status}")
    check(f"{where}: $ {command}", problems)


def check_console_blocks(docs, args):
    global skipped
    work = os.path.join(args.work, "console")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    write_npy(os.path.join(work, "a.npy"), (2, 3), range(6))
    write_npy(os.path.join(work, "b.npy"), (3, 2), range(6))
    # fp8 as numpy saves ml_dtypes' arrays: 1..6 in float8_e4m3fn ('<V1')
    # and float8_e5m2 ('<f1')
    write_npy(os.path.join(work, "w.npy"), (2, 3),
              [0x38, 0x40, 0x44, 0x48, 0x4a, 0x4c], "<V1", "B")
    write_npy(os.path.join(work, "x.npy"), (3, 2),
              [0x3c, 0x40, 0x42, 0x44, 0x45, 0x46], "<f1", "B")
    env = dict(os.environ, EINC_CACHE_DIR=os.path.join(work, "cache"),
               PATH=os.path.dirname(os.path.abspath(args.einc)) + os.pathsep
               + os.environ.get("PATH", ""))
    for doc in docs:
        for info, line, lines in fences(doc):
            where = f"{os.path.relpath(doc, args.src)}:{line}"
            if info[:1] != ["console"]:
                stray = [l for l in lines if l.startswith("$ ")]
                check(f"{where}: no unchecked commands",
                      [f"'{l}' is in a ```{' '.join(info)} block: write it "
                       "in a ```console block, where it is run" for l in stray])
                continue
            if "needs-cuda-build" in info and not args.have_cuda:
                skipped += 1
                print(f"skip {where}: needs a build with the CUDA backend")
                continue
            for command, expected, status in examples(lines):
                run_console(where, command, expected, status, env, work)


# --- C examples -------------------------------------------------------------

def compile_c(args, source, out, link):
    cmd = [args.cc, "-std=c17", "-Wall", "-Wextra", "-Werror",
           *os.environ.get("EINC_TEST_CFLAGS", "").split(),
           "-I", os.path.join(args.src, "include")]
    if args.dlpack_include:
        cmd += ["-I", args.dlpack_include]
    if link:
        cmd += [source, "-o", out, "-L", args.libdir, "-lein",
                "-Wl,-rpath," + os.path.abspath(args.libdir)]
    else:
        cmd += ["-fsyntax-only", source]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.stderr if r.returncode else None


def check_c_blocks(docs, args):
    n = 0
    for doc in docs:
        blocks = fences(doc)
        for i, (info, line, lines) in enumerate(blocks):
            if info[:1] != ["c"]:
                continue
            n += 1
            where = f"{os.path.relpath(doc, args.src)}:{line}"
            src = os.path.join(args.work, f"example{n}.c")
            exe = os.path.join(args.work, f"example{n}")
            if info[1:] == ["declarations"]:
                with open(src, "w") as f:
                    f.write("#include <ein.h>\n" + "\n".join(lines) + "\n")
                err = compile_c(args, src, exe, link=False)
                check(f"{where}: declarations match ein.h",
                      [err] if err else [])
                continue
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            err = compile_c(args, src, exe, link=True)
            if err:
                fail(f"{where}: C example compiles", err)
                continue
            r = subprocess.run([exe], capture_output=True, text=True,
                               timeout=60, cwd=args.work)
            after = blocks[i + 1] if i + 1 < len(blocks) else None
            problems = []
            if r.returncode != 0:
                problems.append(f"exit status {r.returncode}\n{r.stderr}")
            if after and after[0][:1] == ["output"]:
                if r.stdout.splitlines() != after[2]:
                    problems.append("output differs:\n" + "\n".join(
                        difflib.unified_diff(after[2], r.stdout.splitlines(),
                                             "documented", "printed",
                                             lineterm="")))
            else:
                problems.append("no ```output block follows the example")
            check(f"{where}: C example runs as documented", problems)


# --- the C API reference ----------------------------------------------------

def check_api_reference(args):
    header = "".join(open(os.path.join(args.src, "include", h)).read()
                     for h in ("ein.h", "ein_grad.h", "ein_shapecheck.h"))
    doc = os.path.join(args.src, "docs", "c-api.md")
    text = open(doc).read()
    functions = re.findall(r"EIN_API\s+[^;(]*?\b(ein_\w+)\s*\(", header)
    declared, tabled = set(), set()
    for info, _, lines in fences(doc):
        if info == ["c", "declarations"]:
            declared.update(re.findall(r"\b(ein_\w+)\s*\(", "\n".join(lines)))
    for line in text.splitlines():
        if line.startswith("| `ein_"):
            tabled.update(re.findall(r"`(ein_\w+)`", line.split("|")[1]))
    check(f"docs/c-api.md declares all {len(functions)} functions of ein.h",
          [f"{f} (include/ein.h) is in no ```c declarations block of "
           "docs/c-api.md" for f in functions if f not in declared])
    check("docs/c-api.md describes every function in a table",
          [f"{f} is in no table row of docs/c-api.md"
           for f in functions if f not in tabled])
    enum = header.split("typedef enum ein_status {", 1)[1].split("}", 1)[0]
    statuses = re.findall(r"\b(EIN_(?:OK|ERR_\w+))\b", enum)
    check(f"docs/c-api.md lists all {len(statuses)} statuses",
          [f"{s} is not in docs/c-api.md" for s in statuses
           if f"`{s}`" not in text])


# --- the CLI reference and the man page against --help ----------------------

def check_cli_reference(args):
    doc = os.path.join(args.src, "docs", "cli.md")
    secs = sections(doc)
    commands = help_commands(args.einc)
    documented = {s[5:] for s in secs if s.startswith("einc ")}
    check("docs/cli.md has a section for every command of einc --help",
          [f"docs/cli.md: command '{c}' (in einc --help) has no section "
           f"'## einc {c}'" for c in commands if c not in documented] +
          [f"docs/cli.md: section '## einc {c}' names a command that "
           "einc --help does not list" for c in documented - set(commands)])
    main_help = run_einc(args.einc, "--help")
    usage_check("einc", main_help.split("\n\n", 1)[1], secs.get("einc", []),
                doc)
    exit_lines = [l for l in main_help.splitlines()
                  if l.startswith("Exit status:")]
    check("docs/cli.md has einc --help's exit status line",
          [f"docs/cli.md lacks '{l}'" for l in exit_lines
           if l not in open(doc).read()])
    common = table_options(secs.get("Common options", []))
    all_help = set()
    for c in commands:
        text = run_einc(args.einc, c, "--help")
        helped = help_options(text)
        all_help |= helped
        usage_check(f"einc {c}", text, secs.get(f"einc {c}", []), doc)
        table = table_options(secs.get(f"einc {c}", []))
        check(f"docs/cli.md documents every option of einc {c} --help",
              [f"docs/cli.md: option {o} of 'einc {c}' (in einc {c} --help) "
               f"is in neither the options table of '## einc {c}' nor "
               "'## Common options'" for o in sorted(helped - table - common)])
        check(f"docs/cli.md documents only options of einc {c} --help",
              [f"docs/cli.md: '## einc {c}' documents {o}, which einc {c} "
               "--help does not list" for o in sorted(table - helped)])
    check("docs/cli.md's common options are in some --help",
          [f"docs/cli.md: '## Common options' documents {o}, which no "
           "command's --help lists"
           for o in sorted(common - all_help - {"-h", "--help"})])
    return commands


def usage_check(command, help_text, section, doc):
    usage = usage_block(help_text)
    blocks = [[l.rstrip() for l in b[2]]
              for b in parse_fences(section) if b[0] == ["text"]]
    problems = []
    if usage not in blocks:
        near = blocks[0] if blocks else []
        problems.append(f"{os.path.basename(doc)}: the usage block of "
                        f"'## {command}' differs from {command} --help:\n"
                        + "\n".join(difflib.unified_diff(
                            near, usage, "documented", "--help", lineterm="")))
    check(f"docs/cli.md: usage of {command} as --help prints it", problems)


def man_sections(path):
    """Command -> options in the .TP tags of its .SS section."""
    out, command, tag_next = {}, None, False
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith(".SS") or line.startswith(".SH"):
            m = re.match(r'\.SS "einc ([\w-]+)', line.replace("\\-", "-"))
            command = m.group(1) if m else None
            if command:
                out[command] = set()
        elif line.startswith(".TP"):
            tag_next = True
        elif tag_next:
            tag_next = False
            if command:
                plain = re.sub(r'\\f[BIRP]|"', " ", line.replace("\\-", "-"))
                plain = re.sub(r"^\.\w+", " ", plain)
                out[command].update(OPTION.findall(plain))
    return out


def check_man_page(args, commands):
    path = os.path.join(args.src, "docs", "einc.1")
    man = man_sections(path)
    check("einc.1 has a section for every command of einc --help",
          [f"docs/einc.1: command '{c}' (in einc --help) has no "
           f'.SS "einc {c}" section' for c in commands if c not in man])
    common = man.get("check", set())
    for c in commands:
        helped = help_options(run_einc(args.einc, c, "--help"))
        have = man.get(c, set())
        check(f"einc.1 documents every option of einc {c} --help",
              [f"docs/einc.1: option {o} of 'einc {c}' (in einc {c} --help) "
               f'has no .TP entry under .SS "einc {c}" (or "einc check")'
               for o in sorted(helped - have - common)] +
              [f"docs/einc.1: 'einc {c}' documents {o}, which einc {c} "
               "--help does not list" for o in sorted(have - helped)])
    version = run_einc(args.einc, "--version").split()[-1]
    th = [l for l in open(path) if l.startswith(".TH")]
    check("einc.1's .TH names the version of einc --version",
          [] if th and f'"einc {version}"' in th[0]
          else [f"docs/einc.1: .TH should name \"einc {version}\""])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--src", required=True)
    p.add_argument("--einc", required=True)
    p.add_argument("--cc", required=True)
    p.add_argument("--libdir", required=True)
    p.add_argument("--dlpack-include", default="")
    p.add_argument("--have-cuda", type=int, default=1)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    docs_dir = os.path.join(args.src, "docs")
    docs = sorted(os.path.join(docs_dir, f) for f in os.listdir(docs_dir)
                  if f.endswith(".md"))
    commands = check_cli_reference(args)
    check_man_page(args, commands)
    check_api_reference(args)
    check_c_blocks(docs, args)
    check_console_blocks(docs, args)
    if skipped:
        print(f"{skipped} blocks skipped")
    print(f"ein-test-summary: docs: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
