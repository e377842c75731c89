#!/usr/bin/env python3
"""Scores kymo and Apache Otava on the same stored results of a real history.

A repository measured by kymo with per-benchmark instruction counts (a suite with
`instructions = "per-benchmark"`): the counts label the changes (a commit whose count of a
benchmark moved by at least --change-pct from its parent's changed that benchmark's work, in
that direction; one whose count moved by less than --same-pct did not; others are left
unscored), and both tools are judged on the wall time of the same commits:

- kymo: the active findings of `GET /api/v1/repos/REPO/regressions` on the metric `time`
  (refuted ones are closed as false positives and not counted);
- Otava (`otava analyze`, E-divisive), on each commit's minimum and median time, with its
  default algorithm and with `--orig-edivisive true`.

A finding counts at its commit in its direction. Prints a Markdown table.

    scripts/real-history-score.py --server URL --repo NAME --history GIT_DIR [--otava PATH]
"""

import argparse
import csv
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request


def get(server, path):
    with urllib.request.urlopen(server.rstrip("/") + path, timeout=60) as answer:
        return json.load(answer)


def commits(history):
    out = subprocess.run(
        ["git", "-C", history, "log", "--first-parent", "--reverse", "--format=%H %ct"],
        check=True, capture_output=True, text=True).stdout
    return [(line.split()[0], int(line.split()[1])) for line in out.splitlines()]


def measured(server, repo, shas):
    """{(benchmark, metric): {sha: (value, samples)}} from each commit's latest run."""
    series = {}
    for sha, _ in shas:
        try:
            commit = get(server, f"/api/v1/repos/{repo}/commits/{sha}")
        except urllib.error.HTTPError:
            continue
        for result in commit.get("results", []):
            key = (result["benchmark"], result["metric"])
            series.setdefault(key, {})[sha] = (result["value"], result.get("samples") or [])
    return series


def labels(series, shas, change_pct, same_pct):
    """{(benchmark, sha): +1 | -1 | 0} from instruction counts; absent: unscored."""
    out = {}
    for (benchmark, metric), points in series.items():
        if metric != "instructions":
            continue
        order = [sha for sha, _ in shas if sha in points]
        for before, after in zip(order, order[1:]):
            a, b = points[before][0], points[after][0]
            moved = 100.0 * (b - a) / a
            if abs(moved) >= change_pct:
                out[(benchmark, after)] = 1 if moved > 0 else -1
            elif abs(moved) < same_pct:
                out[(benchmark, after)] = 0
    return out


def kymo_findings(server, repo):
    found = set()
    for r in get(server, f"/api/v1/repos/{repo}/regressions"):
        if r["metric"] == "time" and r["state"] != "false_positive":
            found.add((r["benchmark"], r["sha"], 1 if r["kind"] == "regression" else -1))
    return found


def otava_findings(otava, series, shas, statistic, original):
    """Change points Otava finds on each benchmark's per-commit `statistic` of time."""
    benchmarks = sorted(b for b, m in series if m == "time")
    found = set()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data.csv")
        columns = {b: f"m{i}" for i, b in enumerate(benchmarks)}
        with open(data, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time", "commit"] + list(columns.values()))
            for sha, when in shas:
                row = []
                for b in benchmarks:
                    point = series[(b, "time")].get(sha)
                    samples = (point[1] or [point[0]]) if point else []
                    row.append(statistic(samples) if samples else "")
                if all(v != "" for v in row):
                    day = datetime.datetime.fromtimestamp(when, datetime.timezone.utc)
                    w.writerow([day.strftime("%Y-%m-%d %H:%M:%S +0000"), sha] + row)
        config = os.path.join(tmp, "otava.yaml")
        metrics = "\n".join(f"      {c}:\n        direction: -1" for c in columns.values())
        with open(config, "w") as f:
            f.write(f"tests:\n  history:\n    type: csv\n    file: {data}\n"
                    f"    time_column: time\n    attributes: [commit]\n    metrics:\n{metrics}\n")
        args = [otava, "analyze", "--config-file", config, "history", "--output", "json",
                "--since", "100 years ago"]
        if original:
            args += ["--orig-edivisive", "true"]
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        report = json.loads(out[out.index("{"):])
        by_column = {c: b for b, c in columns.items()}
        for point in report.get("history", []):
            sha = point["attributes"]["commit"]
            for change in point["changes"]:
                sign = 1 if float(change["forward_change_percent"]) > 0 else -1
                found.add((by_column[change["metric"]], sha, sign))
    return found


def score(found, truth):
    true = sum(1 for (b, sha, sign) in found if truth.get((b, sha)) == sign)
    false = sum(1 for (b, sha, sign) in found
                if truth.get((b, sha), None) is not None and truth[(b, sha)] != sign)
    real = sum(1 for v in truth.values() if v != 0)
    return true, real, false


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--history", required=True, help="the tracked git repository")
    p.add_argument("--otava", default="otava")
    p.add_argument("--change-pct", type=float, default=2.0)
    p.add_argument("--same-pct", type=float, default=0.1)
    a = p.parse_args()
    shas = commits(a.history)
    series = measured(a.server, a.repo, shas)
    truth = labels(series, shas, a.change_pct, a.same_pct)
    rows = [("kymo (its findings on time)", kymo_findings(a.server, a.repo))]
    for name, statistic in (("minima", min), ("medians", statistics.median)):
        for original in (False, True):
            label = f"Otava, {'original' if original else 'default'} E-divisive, per-commit {name}"
            rows.append((label, otava_findings(a.otava, series, shas, statistic, original)))
    real = sum(1 for v in truth.values() if v != 0)
    same = sum(1 for v in truth.values() if v == 0)
    print(f"{len(shas)} commits, {len({b for b, _ in truth})} benchmarks: {real} labelled "
          f"changes (counts moved ≥ {a.change_pct} %), {same} labelled unchanged "
          f"(< {a.same_pct} %)\n")
    print("| method | real changes found | false findings |")
    print("|---|---|---|")
    for name, found in rows:
        true, real, false = score(found, truth)
        print(f"| {name} | {true} of {real} | {false} |")
    for (b, sha), sign in sorted(truth.items()):
        if sign:
            print(f"- labelled: {b} at {sha[:10]} {'slower' if sign > 0 else 'faster'}",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
