#!/usr/bin/env python3
"""Runs the bad-input catalogue (cases.json) against attnviz-cli.

Each case builds its files in a fresh folder, runs one command and checks that attnviz
refused it properly: the expected exit code (1 data, 2 usage) and no signal, a message
holding the expected substring and no longer than max_message_bytes, within the time and
memory limits, and nothing left in the output folder.

A case (all keys but name/args/exit/message optional):
  name, args            the command; {M} the case's model folder, {D} the case folder,
                        {O} an output path inside {D}/out (the folder that must stay empty)
  exit, message         expected exit code, and a substring of stderr
  model                 "tiny" or "tiny-gpt2": a random model copied to {M} first
  config                keys merged into {M}/config.json (null deletes a key)
  config_raw            config.json replaced by these parts (see parts below)
  header                tensors merged into model.safetensors' header (null deletes one;
                        a key "@repeat:C:N" is C repeated N times); the data is kept
  header_raw            the header replaced by these parts; the data is kept
  truncate_weights      bytes cut from the end of model.safetensors
  remove                files removed from {M}
  files                 {path under {D} ({M} is {D}/model): spec}, where spec is a string,
                        a parts list, {"fifo"}, {"dir"}, {"hex"}, {"symlink"} or
                        {"sparse": size}
  env                   extra environment variables ({M} and {D} substituted in values)
  keep_out              names allowed in {D}/out (made by the case itself)
  max_message_bytes     default 4000
  max_rss_mb            a tighter memory limit for this case (MB, scaled like --max-rss-mb)
  fsize_limit           the largest file the command may write, in bytes (RLIMIT_FSIZE, as
                        `ulimit -f`), with SIGXFSZ ignored so that a write past it fails with
                        EFBIG instead of killing the process
With --worker-manifest FILE the script runs nothing: it makes the files of every case that
names a model input (see worker_request) and writes FILE, a JSON list of what the GUI's
worker is to open for each (tests/test_worker_catalogue.cpp reads it).

Values anywhere in config/header/args may be {"repeat": S, "times": N} (a long string) or
{"nest": N} (N nested arrays). Parts: strings, {"repeat"}, {"join": PATTERN with {i},
"times": N, "sep": S}, {"hex": H} (raw bytes), {"base": true, "replace": [OLD, NEW]} (the original file's text).
"""
import argparse
import json
import re
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def expand_value(v, nests):
    """JSON-able value with {"repeat"} expanded; {"nest"} replaced by a placeholder."""
    if isinstance(v, dict):
        if set(v) == {"repeat", "times"}:
            return v["repeat"] * v["times"]
        if set(v) == {"nest"}:
            nests.append(v["nest"])
            return "@@NEST%d@@" % (len(nests) - 1)
        return {expand_key(k): expand_value(x, nests) for k, x in v.items()}
    if isinstance(v, list):
        return [expand_value(x, nests) for x in v]
    return v


def expand_key(k):
    if k.startswith("@repeat:"):
        _, ch, n = k.split(":")
        return ch * int(n)
    return k


def dumps_with_nests(obj):
    nests = []
    text = json.dumps(expand_value(obj, nests), ensure_ascii=False)
    for i, n in enumerate(nests):
        text = text.replace('"@@NEST%d@@"' % i, "[" * n + "]" * n)
    return text


def parts_bytes(parts, base):
    out = b""
    for p in parts:
        if isinstance(p, str):
            out += p.encode()
        elif "repeat" in p:
            out += (p["repeat"] * p["times"]).encode()
        elif "join" in p:
            out += p.get("sep", "").join(p["join"].replace("{i}", str(i)) for i in range(p["times"])).encode()
        elif "hex" in p:
            out += bytes.fromhex(p["hex"])
        elif p.get("base"):
            b = base
            if "replace" in p:
                b = b.replace(p["replace"][0].encode(), p["replace"][1].encode())
            out += b
        else:
            raise ValueError("unknown part %r" % (p,))
    return out


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return b[8:8 + n], b[8 + n:]


def write_st(path, header, data):
    open(path, "wb").write(struct.pack("<Q", len(header)) + header + data)


def make_file(path, spec):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if isinstance(spec, str):
        open(path, "wb").write(spec.encode())
    elif isinstance(spec, list):
        open(path, "wb").write(parts_bytes(spec, b""))
    elif spec.get("fifo"):
        os.mkfifo(path)
    elif spec.get("dir"):
        os.makedirs(path, exist_ok=True)
    elif "hex" in spec:
        open(path, "wb").write(bytes.fromhex(spec["hex"]))
    elif "symlink" in spec:
        os.symlink(spec["symlink"], path)
    elif "sparse" in spec:
        with open(path, "wb") as f:
            f.truncate(spec["sparse"])
    else:
        raise ValueError("unknown file spec %r" % (spec,))


def setup(case, d, bases):
    m = os.path.join(d, "model")
    os.makedirs(os.path.join(d, "out"))
    if case.get("model"):
        shutil.copytree(bases[case["model"]], m)
    for r in case.get("remove", []):
        os.remove(os.path.join(m, r))
    cfg = os.path.join(m, "config.json")
    if "config" in case:
        j = json.load(open(cfg))
        for k, v in case["config"].items():
            if v is None:
                j.pop(k, None)
            else:
                j[k] = v
        open(cfg, "wb").write(dumps_with_nests(j).encode())
    if "config_raw" in case:
        base = open(cfg, "rb").read()
        open(cfg, "wb").write(parts_bytes(case["config_raw"], base))
    st = os.path.join(m, "model.safetensors")
    if "header" in case:
        h, data = read_st(st)
        j = json.loads(h)
        for k, v in case["header"].items():
            k = expand_key(k)
            if v is None:
                j.pop(k, None)
            elif isinstance(v, dict) and isinstance(j.get(k), dict):
                for kk, vv in v.items():
                    if vv is None:
                        j[k].pop(kk, None)
                    else:
                        j[k][kk] = vv
            else:
                j[k] = v
        write_st(st, dumps_with_nests(j).encode(), data)
    if "header_raw" in case:
        h, data = read_st(st)
        write_st(st, parts_bytes(case["header_raw"], h), data)
    if "truncate_weights" in case:
        size = os.path.getsize(st)
        with open(st, "r+b") as f:
            f.truncate(size - case["truncate_weights"])
    for path, spec in case.get("files", {}).items():
        make_file(os.path.join(d, path), spec)
    return m


def substitute(arg, m, d):
    if isinstance(arg, dict):
        arg = expand_value(arg, [])
    return arg.replace("{M}", m).replace("{D}", d).replace("{O}", os.path.join(d, "out", "result"))


def case_env(case, m, d):
    """The case's environment variables, {M} and {D} substituted (a store folder inside the case)."""
    return {k: substitute(v, m, d) for k, v in case.get("env", {}).items()}


# Case keys that change the files of the model folder {M}.
MODEL_EDITS = ("config", "config_raw", "header", "header_raw", "truncate_weights", "remove")


def arg_after(args, flag):
    """The argument after `flag` (unsubstituted), or None."""
    return args[args.index(flag) + 1] if flag in args[:-1] else None


def names_model_input(case):
    """True when the case is about a model input the GUI can open: a --model that is not
    the untouched base model or a shipped built-in (config.json, weights, shard index, GGUF,
    tokenizer files, a missing folder, a bad builtin: name), or a tokenizer file given with
    --tokenizer. Cases that
    must succeed (exit 0) are about time and memory, not refusal, and are left out."""
    if case["exit"] == 0:
        return False
    args = case["args"]
    tokenizer = arg_after(args, "--tokenizer")
    if isinstance(tokenizer, str):
        return True
    model = arg_after(args, "--model")
    if not isinstance(model, str):
        return False
    if model.startswith("builtin:"):  # a bad name, not a shipped model used for other input
        return model[len("builtin:"):] not in os.listdir(os.path.join(HERE, "..", "..", "assets", "models"))
    if model != "{M}":
        return True
    return any(k in case for k in MODEL_EDITS) or any(p.startswith("model/") for p in case.get("files", {}))


def worker_request(case, m, d, bases):
    """What the GUI's worker opens for a case that names_model_input (its files made): the
    model (a tokenizer file alone goes into a copy of the good tiny model, under the name
    the loader looks for), the text typed ("" for the worker test's own), the message
    expected and the environment."""
    args = case["args"]
    tokenizer = arg_after(args, "--tokenizer")
    if isinstance(tokenizer, str):
        path = substitute(tokenizer, m, d)
        if path.endswith(".gguf"):
            model = path  # a GGUF file carries its tokenizer: open it as the model
        else:
            model = os.path.join(d, "worker-model")
            shutil.copytree(bases["tiny"], model)
            os.remove(os.path.join(model, "tokenizer.json"))
            name = "tokenizer.model" if path.endswith(".model") else "tokenizer.json"
            if os.path.exists(path) or os.path.islink(path):
                os.rename(path, os.path.join(model, name))
    else:
        model = substitute(arg_after(args, "--model"), m, d)
    text = arg_after(args, "--text")
    return {"name": case["name"], "model": model, "text": substitute(text, m, d) if text is not None else "",
            "message": case["message"], "env": case_env(case, m, d)}


def run_case(case, cli, workdir, bases, max_rss_mb, timeout):
    d = os.path.join(workdir, case["name"])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    m = setup(case, d, bases)
    args = [cli] + [substitute(a, m, d) for a in case["args"]]
    env = dict(os.environ)
    env.update(case_env(case, m, d))
    errors = []
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        preexec = None
        if "fsize_limit" in case:
            def preexec(limit=case["fsize_limit"]):
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # ignored dispositions survive exec
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, preexec_fn=preexec)
        status = None
        while status is None:
            pid, st, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                status = st
                break
            if time.monotonic() - t0 > timeout:
                p.kill()
                _, status, ru = os.wait4(p.pid, 0)
                errors.append("took longer than %d s" % timeout)
                break
            time.sleep(0.005)
        p.returncode = 0
        elapsed = time.monotonic() - t0
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    if os.WIFSIGNALED(status):
        errors.append("killed by signal %d" % os.WTERMSIG(status))
    else:
        code = os.WEXITSTATUS(status)
        if code != case["exit"]:
            errors.append("exit code %d, expected %d" % (code, case["exit"]))
    if case["message"] not in stderr:
        errors.append("message lacks %r" % case["message"])
    limit = case.get("max_message_bytes", 4000)
    if len(stderr.encode()) > limit:
        errors.append("message is %d bytes (more than %d)" % (len(stderr.encode()), limit))
    rss_mb = ru.ru_maxrss / 1024.0
    # A case's own limit is for the normal build; a sanitizer run raises --max-rss-mb from
    # its default of 1024 and the case's limit by the same factor.
    max_rss_mb = min(max_rss_mb, case.get("max_rss_mb", 1024) * max_rss_mb / 1024.0)
    if rss_mb > max_rss_mb:
        errors.append("used %.0f MB of memory (more than %d)" % (rss_mb, max_rss_mb))
    left = sorted(set(os.listdir(os.path.join(d, "out"))) - set(case.get("keep_out", [])))
    if left:
        errors.append("left behind in the output folder: %s" % ", ".join(left))
    for keep in case.get("keep_out", []):
        sub = os.path.join(d, "out", keep)
        if os.path.isdir(sub) and os.listdir(sub):
            errors.append("left files inside %s" % keep)
    return errors, stderr, elapsed, rss_mb


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--cases", default=os.path.join(HERE, "cases.json"))
    ap.add_argument("--only", default="", help="run only cases whose name contains this")
    ap.add_argument("--shard", default="1/1", metavar="K/N",
                    help="run the K-th of N interleaved parts of the catalogue (cases K, K + N, ... counted from 1)")
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("ATTNVIZ_BAD_INPUTS_TIMEOUT", 60)))
    ap.add_argument("--max-rss-mb", type=int, default=int(os.environ.get("ATTNVIZ_BAD_INPUTS_MAX_RSS_MB", 1024)))
    ap.add_argument("--worker-manifest", default="",
                    help="make the model-input cases' files and write what the GUI worker opens to this JSON file")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    m = re.fullmatch(r"([0-9]+)/([0-9]+)", a.shard)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        ap.error("--shard takes K/N with 1 <= K <= N, not %r" % a.shard)
    shard, shards = int(m.group(1)) - 1, int(m.group(2))
    cases = json.load(open(a.cases))
    names = [c["name"] for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        sys.exit("duplicate case names: %s" % ", ".join(sorted(dup)))
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    bases = {}
    small = ["--layers", "2", "--embd", "64", "--heads", "4", "--kv-heads", "2", "--vocab", "96"]
    for name, preset, extra in (("tiny", "tiny", []), ("tiny-gpt2", "tiny-gpt2", []),
                                ("small-phi3", "phi4-mini", small), ("small-gemma3", "gemma3-270m", small),
                                ("small-qwen35", "qwen3.5-0.8b", small[:1] + ["4"] + small[2:]),
                                ("small-lfm2", "lfm2-350m", small[:1] + ["4"] + small[2:])):
        path = os.path.join(a.workdir, "base-" + name)
        subprocess.run([a.cli, "random", "--preset", preset, "--seed", "1", "--out", path] + extra, check=True,
                       stderr=subprocess.DEVNULL)
        bases[name] = path
    if a.worker_manifest:
        requests = []
        for c in cases:
            if a.only in c["name"] and names_model_input(c):
                d = os.path.join(a.workdir, c["name"])
                os.makedirs(d)
                requests.append(worker_request(c, setup(c, d, bases), d, bases))
        with open(a.worker_manifest, "w") as f:
            json.dump(requests, f, indent=1)
        print("%d of %d cases name a model input: %s" % (len(requests), len(cases), a.worker_manifest))
        sys.exit(0 if requests else "no case names a model input")
    failed = 0
    ran = 0
    t_all = time.monotonic()
    for i, c in enumerate(cases):
        if a.only not in c["name"] or i % shards != shard:
            continue
        ran += 1
        errors, stderr, elapsed, rss = run_case(c, a.cli, a.workdir, bases, a.max_rss_mb, a.timeout)
        if errors:
            failed += 1
            print("FAIL %s: %s\n  stderr: %s" % (c["name"], "; ".join(errors), stderr[:600].rstrip()))
        elif a.verbose:
            print("ok   %-40s exit %d  %.2f s  %.0f MB  %s" % (c["name"], c["exit"], elapsed, rss,
                                                               stderr.strip().splitlines()[0][:100] if stderr.strip() else ""))
    print("%d of %d bad-input cases passed in %.1f s%s" % (ran - failed, ran, time.monotonic() - t_all,
                                                            " (part %s)" % a.shard if shards > 1 else ""))
    if ran == 0:
        sys.exit("no case matched")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
