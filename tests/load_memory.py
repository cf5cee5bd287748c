#!/usr/bin/python3
"""Loading a model holds its weights once: the peak resident memory of `attnviz-cli info`
on a float32 model stays below 1.25 x the weights + 64 MB (the program itself). The
loaders give back each tensor's file pages once it is converted (core/model/pages.h);
without that the file's pages stay mapped beside the converted weights, about 2 x the
weights. Also under AddressSanitizer (its quarantine of freed blocks is turned off here,
since each transposed tensor's temporary copy would otherwise be held).

    load_memory.py --cli PATH/attnviz-cli --workdir DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    model = os.path.join(a.workdir, "gpt2s")
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"
    subprocess.run([a.cli, "random", "--preset", "gpt2-small", "--out", model], check=True, env=env,
                   stderr=subprocess.DEVNULL)
    # os.wait4 gives this one child's own peak (RUSAGE_CHILDREN would take the writer's too).
    proc = subprocess.Popen([a.cli, "info", "--model", model, "--json"], env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        print(f"attnviz-cli info failed with {proc.returncode}")
        return 1
    peak_mb = usage.ru_maxrss / 1024  # KiB on Linux
    info = json.loads(out)
    weights_mb = os.path.getsize(os.path.join(model, "model.safetensors")) / 2**20
    bound = 1.25 * weights_mb + 64
    print(f"info --model (parameters {info.get('parameters')}): peak RSS {peak_mb:.0f} MB, "
          f"weights file {weights_mb:.0f} MB, bound {bound:.0f} MB")
    return 0 if peak_mb <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
