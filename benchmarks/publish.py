"""Run a benchmark and publish its results page: docs/results/<name>.md, made from what it printed
and the JSON it wrote, with the command, commit, machine and date in each.

    python benchmarks/publish.py import_graph [ARGS...]     # runs benchmarks/import_graph.py ARGS
    python benchmarks/publish.py --index                    # rewrites docs/results/README.md only

The benchmark writes its JSON to benchmarks/results/<name>.json (its ``--out``); this script adds
a ``provenance`` record to it and writes the page: the benchmark's purpose (its docstring's
first paragraph), the provenance, and the table it printed, verbatim. A page is only ever
written from a run that finished: one that exited 0, or one that wrote its JSON afresh and then
exited non-zero as its own verdict (a benchmark that checks a target exits 1 when one is not met:
the page says so); a run that wrote no JSON writes no page, so no page shows half a result.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS, PAGES = REPO / "benchmarks" / "results", REPO / "docs" / "results"


def provenance(command: str) -> dict:
    """What a figure needs beside it to be judged: how it was made, from which code, where, when."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], check=False, cwd=REPO, capture_output=True, text=True).stdout.strip()

    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {"command": command, "commit": git("rev-parse", "--short", "HEAD") + ("-dirty" if dirty else ""),
            "machine": _machine(), "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}


def _machine() -> str:
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs" + (f" ({model})" if model else "")


def purpose(script: Path) -> str:
    """The first paragraph of the benchmark's docstring."""
    import ast

    doc = ast.get_docstring(ast.parse(script.read_text())) or script.stem
    return doc.split("\n\n")[0].replace("\n", " ")


def page(name: str, script: Path, stamp: dict, printed: str) -> str:
    return "\n".join([
        f"# {name}", "", "Back to [the results](README.md). Made by `benchmarks/publish.py`; do not edit.", "",
        purpose(script), "",
        f"- command: `{stamp['command']}`", f"- commit: {stamp['commit']}", f"- machine: {stamp['machine']}",
        f"- date: {stamp['date']}", *_verdict(stamp["exit_status"]), f"- JSON: `benchmarks/results/{name}.json` (not committed; the command remakes it)",
        "", "```", printed.rstrip(), "```", ""])


def _verdict(status: int) -> list[str]:
    if status == 0:
        return []
    return [f"- exit status: {status} (the benchmark's own verdict: a target it checks was not met; see the table)"]


def index() -> Path:
    lines = ["# Results pages", "", "Each made by `python benchmarks/publish.py NAME [ARGS]` from one run of the benchmark;",
             "docs/results.md says what the figures mean and which targets they serve.", ""]
    for md in sorted(PAGES.glob("*.md")):
        if md.name != "README.md":
            head = md.read_text().splitlines()
            date = next((x.split(": ", 1)[1] for x in head if x.startswith("- date: ")), "?")
            lines.append(f"- [{md.stem}]({md.name}): {date}")
    PAGES.mkdir(parents=True, exist_ok=True)
    (PAGES / "README.md").write_text("\n".join(lines) + "\n")
    return PAGES / "README.md"


def publish(name: str, args: list[str]) -> int:
    script = REPO / "benchmarks" / f"{name}.py"
    if not script.is_file() or name == "publish":
        print(f"publish: no benchmark benchmarks/{name}.py", file=sys.stderr)
        return 2
    out = RESULTS / f"{name}.json"
    command = " ".join(["python", f"benchmarks/{name}.py", *map(shlex.quote, args)])
    RESULTS.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)  # a JSON left by an earlier run must not pass for this one's
    run = subprocess.run([sys.executable, str(script), *args, "--out", str(out)], check=False, cwd=REPO,
                         stdout=subprocess.PIPE, text=True)
    sys.stdout.write(run.stdout)
    if not out.is_file():
        print(f"publish: {command} exited {run.returncode} and wrote no JSON; no page written", file=sys.stderr)
        return run.returncode or 2
    stamp = {**provenance(command), "exit_status": run.returncode}
    data = json.loads(out.read_text())
    out.write_text(json.dumps({**data, "provenance": stamp} if isinstance(data, dict)
                              else {"results": data, "provenance": stamp}, indent=2))
    PAGES.mkdir(parents=True, exist_ok=True)
    (PAGES / f"{name}.md").write_text(page(name, script, stamp, run.stdout))
    index()
    print(f"published docs/results/{name}.md", file=sys.stderr)
    return run.returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", nargs="?", help="the benchmark: benchmarks/NAME.py")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="its arguments (not --out: publish sets it)")
    ap.add_argument("--index", action="store_true", help="only rewrite docs/results/README.md")
    opts = ap.parse_args(argv)
    if opts.index or not opts.name:
        print(index())
        return 0
    if "--out" in opts.args:
        ap.error("--out is publish's: the JSON goes to benchmarks/results/NAME.json")
    return publish(opts.name, opts.args)


if __name__ == "__main__":
    sys.exit(main())
