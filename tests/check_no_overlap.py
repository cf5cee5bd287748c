#!/usr/bin/env python3
"""Checks a screenshot's sidecar JSON (attnviz --screenshot F.png writes F.png.json): no two
windows drawn overlap, every window lies inside the main window, and the windows named on
the command line were drawn.
  check_no_overlap.py SIDECAR.json [TITLE...]
Rectangles are (x, y, w, h) in the PNG's pixels; edges may share one pixel (rounding)."""
import json
import sys


def main():
    j = json.load(open(sys.argv[1]))
    wins = j["windows"]
    W, H = j["window"]
    bad = []
    for t in sys.argv[2:]:
        if t not in wins:
            bad.append("%r was not drawn (drawn: %s)" % (t, ", ".join(sorted(wins))))
    names = sorted(wins)
    for i, a in enumerate(names):
        x, y, w, h = wins[a]
        if x < -1 or y < -1 or x + w > W + 1 or y + h > H + 1:
            bad.append("%r %s runs outside the %dx%d window" % (a, wins[a], W, H))
        for b in names[i + 1:]:
            u, v, p, q = wins[b]
            ox = min(x + w, u + p) - max(x, u)
            oy = min(y + h, v + q) - max(y, v)
            if ox > 1 and oy > 1:
                bad.append("%r %s and %r %s overlap by %dx%d" % (a, wins[a], b, wins[b], ox, oy))
    for m in bad:
        print(m)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
