#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The include tiers: every header of the library (include/datamask) and of the front-end layer
(frontend/include/datamask: run/ and frontend/) includes only headers of its own tier or a lower
one, as docs/architecture.md's map states them (one folder a tier: no header but the umbrella and
the version above the folders); the library holds none of the front-end layer's folders, so the
header-only package never reaches it; and the learners' headers pull in no file reader, no kNN
graph builder and nothing of the run layer.

    tiers_test.py REPOSITORY_ROOT

The tiers are read from docs/architecture.md (the lines `tier N NAME: PATTERNS` between the markers
`<!-- tiers -->` and `<!-- /tiers -->`), so the map a reader sees is the one checked. A pattern is a
header path relative to a root's datamask/ folder ("options.hpp") or a folder ("objectives/"); the
longest pattern that matches a header gives its tier.
"""
import os
import re
import sys

# The learners' headers, and what none of them may pull in (directly or through others).
LEARNERS = ["learners/pg/learner.hpp", "learners/continuous/learner.hpp", "learners/continuous.hpp"]
FORBIDDEN = re.compile(r"^(io/|run/|frontend/|objectives/knn/(exact|clustered|build)\.hpp$)")
# The front-end layer's folders: in frontend/include/datamask, never in the library's include/.
FRONTEND_FOLDERS = ("run/", "frontend/")
# How many of the library's headers `#include <datamask/learners/pg/learner.hpp>` may bring (25:
# learners/protocol.hpp, the optimizers' protocol, joined its interface; 26:
# core/detail/chunked_sum.hpp, the order of a subset sum that f and every backend share).
LEARNER_HEADERS_MAX = 26


def read_tiers(readme):
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"<!-- tiers -->(.*?)<!-- /tiers -->", text, re.S)
    if not m:
        raise SystemExit("docs/architecture.md has no <!-- tiers --> ... <!-- /tiers --> map")
    tiers = {}
    for line in m.group(1).splitlines():
        t = re.match(r"\s*tier (\d+) [\w-]+:\s*(.*)$", line)
        if t:
            for pattern in t.group(2).split():
                tiers[pattern] = int(t.group(1))
    if not tiers:
        raise SystemExit("docs/architecture.md's tier map lists no tier")
    return tiers


def tier_of(header, tiers):
    best = None
    for pattern, tier in tiers.items():
        hit = header == pattern or (pattern.endswith("/") and header.startswith(pattern))
        if hit and (best is None or len(pattern) > len(best)):
            best = pattern
    return None if best is None else tiers[best]


def includes(path):
    text = open(path, encoding="utf-8").read()
    return re.findall(r'^\s*#\s*include\s*[<"]datamask/([^>"]+)[>"]', text, re.M)


def headers_under(root):
    return {os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/"): os.path.join(d, f)
            for d, _, fs in os.walk(root) for f in fs if f.endswith(".hpp")}


def closure(header, graph):
    seen, todo = set(), [header]
    while todo:
        h = todo.pop()
        for d in graph.get(h, []):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def main():
    repo = sys.argv[1]
    library = headers_under(os.path.join(repo, "include", "datamask"))
    frontend = headers_under(os.path.join(repo, "frontend", "include", "datamask"))
    if not frontend:
        raise SystemExit("frontend/include/datamask holds no header: the front-end layer went unchecked")
    tiers = read_tiers(os.path.join(repo, "docs", "architecture.md"))
    problems = ["%s: in include/ and in frontend/include/" % h for h in sorted(set(library) & set(frontend))]
    problems += ["include/datamask/%s: the front-end layer's folders live in frontend/include" % h
                 for h in sorted(library) if h.startswith(FRONTEND_FOLDERS)]
    problems += ["frontend/include/datamask/%s: outside the front-end layer's folders (%s)" %
                 (h, " ".join(FRONTEND_FOLDERS)) for h in sorted(frontend) if not h.startswith(FRONTEND_FOLDERS)]
    paths = {**library, **frontend}
    headers = sorted(paths)
    graph = {h: includes(paths[h]) for h in headers}
    # The header-only package never reaches the front-end layer, whatever the map's numbers say.
    problems += ["include/datamask/%s includes datamask/%s, of the front-end layer" % (h, d)
                 for h in sorted(library) for d in graph[h] if d in frontend and d not in library]
    for h in headers:
        th = tier_of(h, tiers)
        if th is None:
            problems.append("%s: in no tier of docs/architecture.md's map" % h)
            continue
        for d in graph[h]:
            td = tier_of(d, tiers)
            if d not in graph:
                problems.append("%s includes datamask/%s, which does not exist" % (h, d))
            elif td is not None and td > th:
                problems.append("%s (tier %d) includes %s (tier %d): against the grain" % (h, th, d, td))
    loose = sorted(h for h in library if "/" not in h and h not in ("datamask.hpp", "version.hpp"))
    if loose:
        problems.append("%s: outside the tiers' folders (only the umbrella and the version header are)" %
                        ", ".join(loose))
    for h in LEARNERS:
        pulled = closure(h, graph)
        bad = sorted(d for d in pulled if FORBIDDEN.match(d))
        if bad:
            problems.append("%s pulls in %s" % (h, ", ".join(bad)))
    learner = closure("learners/pg/learner.hpp", graph)
    print("datamask/learners/pg/learner.hpp brings %d of the library's %d headers" % (len(learner), len(library)))
    if len(learner) > LEARNER_HEADERS_MAX:
        problems.append("learner.hpp brings %d headers, more than %d: %s" %
                        (len(learner), LEARNER_HEADERS_MAX, ", ".join(sorted(learner))))
    if problems:
        raise SystemExit("include tiers broken:\n  " + "\n  ".join(problems))
    print("%d headers (%d of the front-end layer), every include within its tier or below" %
          (len(headers), len(frontend)))


if __name__ == "__main__":
    main()
