#!/usr/bin/env python3
"""How much of the window each layout preset gives the attention heatmap.

Opens every preset at 1280x720, 1600x1000 and 1920x1080 with the panels of that layout
open (Explore: its default panels; Research: the Text view, Logit lens, Direct logit
attribution and Compare prompts; Classroom: the heatmap, caption, lesson and text box),
through `attnviz --screenshot F.png --layout NAME --size WxH`, and reads the sidecar
F.png.json: the heatmap's share of the window is rects.heatmap's area over the window's,
and layout.cut names the panels whose content ran past their tile with no scrollbar.
Prints a Markdown table (docs/gui.md keeps one). A measurement, not a test.

  scripts/layout_density.py [--attnviz build/app/attnviz] [--out DIR] [--text TEXT]
Needs xvfb-run (the screenshots are taken under a virtual display of 1920x1200)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

PRESETS = {
    "explore": [],
    "research": ["--text-view", "--lens", "--attribution", "--compare"],
    "classroom": [],
}
SIZES = [(1280, 720), (1600, 1000), (1920, 1080)]
GOALS = {"explore": 25.0, "research": 20.0, "classroom": 45.0}


def shot(attnviz, out, preset, w, h, text):
    png = os.path.join(out, "%s-%dx%d.png" % (preset, w, h))
    cmd = [attnviz, "--screenshot", png, "--layout", preset, "--size", "%dx%d" % (w, h), "--text", text]
    cmd += PRESETS[preset]
    env = dict(os.environ, OMP_NUM_THREADS="1", XDG_CONFIG_HOME=os.path.join(out, "config"),
               XDG_CACHE_HOME=os.path.join(out, "cache"))
    if preset == "classroom":  # the lesson at its softmax step: the heatmap shows the weights, as elsewhere
        env["ATTNVIZ_LESSON_STEP"] = "6"
    r = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1920x1200x24"] + cmd, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("attnviz failed (%s):\n%s" % (" ".join(cmd), r.stdout[-2000:]))
    return png, json.load(open(png + ".json"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--attnviz", default=os.path.join(here, "..", "build", "app", "attnviz"))
    ap.add_argument("--out", default="")
    ap.add_argument("--text", default="The cat sat on the mat. The cat ate the fish.")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="layout-density-")
    os.makedirs(out, exist_ok=True)
    rows = []
    for preset in PRESETS:
        for w, h in SIZES:
            png, j = shot(a.attnviz, out, preset, w, h, a.text)
            W, H = j["window"]
            x, y, hw, hh = j["rects"]["heatmap"]
            share = 100.0 * hw * hh / (W * H)
            cut = j.get("layout", {}).get("cut", {})
            opened = sorted(t for t in j.get("windows", {}) if t != "status bar")
            rows.append((preset, "%dx%d" % (W, H), "%dx%d" % (hw, hh), share, cut, opened))
    print("| layout | window | heatmap (px) | share of the window | goal | panels drawn | cut off (no scrollbar) |")
    print("|---|---|---|---|---|---|---|")
    for preset, win, px, share, cut, opened in rows:
        cuts = ", ".join("%s (%s)" % (k, v) for k, v in sorted(cut.items())) or "none"
        print("| %s | %s | %s | %.1f %% | %s %.0f %% | %d | %s |" % (
            preset, win, px, share, "\u2265", GOALS[preset], len(opened), cuts))
    print("\nscreenshots in %s" % out, file=sys.stderr)


if __name__ == "__main__":
    main()
