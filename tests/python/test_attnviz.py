"""`import attnviz` against attnviz-cli, run as a separate process on the same models: every
tensor of a run equals the CLI's dump of the same tokens bit for bit (the dump read here by
a small safetensors reader of its own), the analyses equal the CLI's --json, the image
equals `export`'s PNG; errors, argument checks, appends, threads and lifetimes.

Run by ctest (PYTHONPATH = the build's python/ folder, ATTNVIZ_CLI = its attnviz-cli)."""

import gc
import json
import os
import struct
import subprocess
import threading

import numpy as np
import pytest

import attnviz

CLI = os.environ["ATTNVIZ_CLI"]
TOKENS = [3, 17, 5, 42, 8, 17, 5, 42, 11, 2, 60, 7]


def cli(*args, check=True):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"attnviz-cli {' '.join(map(str, args))}: exit {r.returncode}: {r.stderr}")
    return r


def read_safetensors(path):
    """name -> numpy array, written here from the format's definition (8-byte header length,
    JSON header, raw little-endian data)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": "<f4", "I32": "<i4"}[info["dtype"]]
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + a:8 + n + b], dtype=dtype).reshape(info["shape"])
    return out


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """One small random model of each layer kind: softmax (llama), gated delta rule (Qwen3.5),
    short convolution (LFM2)."""
    root = tmp_path_factory.mktemp("models")
    made = {}
    for kind, preset in [("softmax", "tiny"), ("gated_delta", "qwen3.5-0.8b"), ("short_conv", "lfm2-350m")]:
        d = root / kind
        cli("random", "--preset", preset, "--layers", "4", "--embd", "64", "--heads", "4", "--kv-heads", "2",
            "--vocab", "96", "--context", "64", "--seed", "3", "--out", d)
        made[kind] = str(d)
    return made


@pytest.mark.parametrize("kind", ["softmax", "gated_delta", "short_conv"])
def test_every_tensor_equals_the_cli_dump(models, kind, tmp_path):
    path = models[kind]
    trace = attnviz.Model(path).run(tokens=TOKENS)
    out = tmp_path / "d.safetensors"
    cli("dump", "--model", path, "--tokens", ",".join(map(str, TOKENS)), "--out", out)
    dump = read_safetensors(out)
    assert sorted(trace.keys()) == sorted(dump.keys())
    for name, want in dump.items():
        got = trace[name]
        assert got.dtype == want.dtype, name
        assert got.shape == want.shape, name
        assert np.array_equal(got, want), f"{name}: largest difference {np.nanmax(np.abs(got - want))}"
    assert trace.tokens == TOKENS
    kinds = attnviz.Model(path).config["layer_kinds"]
    assert kind in kinds
    # BertViz's input: one (1, H, T, T) array per softmax layer, rows summing to 1
    att = trace.attention()
    assert len(att) == kinds.count("softmax")
    for a in att:
        assert a.shape[0] == 1 and a.shape[2] == a.shape[3] == len(TOKENS)
        assert np.allclose(a.sum(axis=-1), 1.0, atol=1e-5)


def test_lent_arrays_are_read_only_and_outlive_the_model(models):
    model = attnviz.Model(models["softmax"])
    trace = model.run(tokens=TOKENS)
    probs = trace["layers.1.probs"]
    copy = probs.copy()
    with pytest.raises(ValueError):
        probs[0, 0, 0] = 5.0
    del model, trace
    gc.collect()
    assert np.array_equal(probs, copy)  # the buffer is still the trace's, alive through the array


def test_a_second_run_does_not_change_the_first_trace(models):
    model = attnviz.Model(models["softmax"])
    first = model.run(tokens=TOKENS[:6])
    before = first["layers.0.probs"].copy()
    model.run(tokens=[9, 9, 9, 9, 9, 9])
    assert np.array_equal(first["layers.0.probs"], before)


def test_an_appended_text_reuses_the_cache_and_equals_a_full_pass(models):
    model = attnviz.Model(models["softmax"])
    model.run(tokens=TOKENS[:8])
    longer = model.run(tokens=TOKENS)
    assert model.last_recomputed_from == 8
    fresh = attnviz.Model(models["softmax"]).run(tokens=TOKENS)
    assert attnviz.Model(models["softmax"]).last_recomputed_from == 0
    # float32 products of 4 new rows and of 12 rows round differently (other BLAS kernels):
    # equal within 1e-4, relative to the largest value of the tensor
    for name in ("layers.3.probs", "layers.3.out", "logits"):
        scale = max(1.0, float(np.abs(fresh[name]).max()))
        assert np.abs(longer[name] - fresh[name]).max() <= 1e-4 * scale, name


def test_text_tokens_and_token_strings_follow_the_tokenizer():
    model = attnviz.Model("builtin:fortunes-en")
    text = "You will find what you seek."
    ids = model.tokenizer.encode(text)
    trace = model.run(text=text)
    assert trace.tokens == ids
    assert len(trace.token_strings) == len(ids)
    assert "".join(trace.token_strings).replace(" ", "") == text.replace(" ", "")
    assert model.tokenizer.decode(ids) == text
    cfg = model.config
    assert len(cfg["layer_kinds"]) == cfg["layers"] == cfg["n_layer"]
    assert cfg == dict(cfg, **json.loads(cli("info", "--model", "builtin:fortunes-en", "--json").stdout))


def test_analyses_equal_the_cli_json(models):
    path = models["softmax"]
    tk = ",".join(map(str, TOKENS))
    model = attnviz.Model(path)
    lens = model.lens(tokens=TOKENS, top=3)
    want = json.loads(cli("lens", "--model", path, "--tokens", tk, "--top", "3", "--json").stdout)
    assert set(lens) == set(want)
    assert np.array_equal(lens["top_ids"], np.array(want["top_ids"]))
    assert np.array_equal(lens["top_probs"], np.array(want["top_probs"]))
    dla = model.heads(tokens=TOKENS, dla=True)
    want = json.loads(cli("heads", "--model", path, "--tokens", tk, "--dla", "--json").stdout)
    assert isinstance(dla["heads"], np.ndarray) and dla["heads"].shape == (4, 4)
    assert np.array_equal(dla["heads"], np.array(want["heads"]))
    assert dla["sum"] == want["sum"]
    qk = model.qk(2, 1, 9, 4, tokens=TOKENS)
    want = json.loads(cli("qk", "--model", path, "--tokens", tk, "--layer", 2, "--head", 1, "--query", 9, "--key", 4,
                          "--json").stdout)
    assert qk["parts"] == want["parts"] and qk["score"] == want["score"]
    assert np.array_equal(qk["terms"], np.array(want["terms"]))


def test_the_image_is_exports_png(models, tmp_path):
    path = models["softmax"]
    img = attnviz.Model(path).run(tokens=TOKENS).show(layer=1, head=2)
    out = tmp_path / "e.png"
    cli("export", "--model", path, "--tokens", ",".join(map(str, TOKENS)), "--layer", 1, "--head", 2, "--out", out)
    assert img._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    assert img._repr_png_() == out.read_bytes()


def test_failures_raise_attnviz_error_with_the_cli_message(models, tmp_path):
    missing = str(tmp_path / "no-such-model")
    r = cli("info", "--model", missing, check=False)
    assert r.returncode != 0
    with pytest.raises(attnviz.Error) as e:
        attnviz.Model(missing)
    assert str(e.value) and str(e.value) in r.stderr
    model = attnviz.Model(models["softmax"])
    with pytest.raises(attnviz.Error, match="outside the vocabulary"):
        model.run(tokens=[1, 2, 96])
    with pytest.raises(attnviz.Error, match="block_size"):
        model.run(tokens=[1, 2], block_size=0)
    with pytest.raises(attnviz.Error, match="unknown stage"):
        model.run(tokens=[1, 2], stages="probs,nonsense")
    with pytest.raises(attnviz.Error, match="exactly one"):
        model.run(tokens=[1, 2], text="x")
    with pytest.raises(attnviz.Error):
        model.run(tokens=[1, 2], ablate="9:0")
    with pytest.raises(TypeError, match="tokens"):
        model.run(tokens="1,2,3")
    with pytest.raises(TypeError, match="tokens"):
        model.run(tokens=[1, "2"])
    with pytest.raises(TypeError, match="name"):
        attnviz.Model(3)
    with pytest.raises(KeyError):
        model.run(tokens=[1, 2])["layers.0.nothing"]
    with pytest.raises(attnviz.Error):
        model.qk(0, 0, 5, 9, tokens=[1, 2])  # positions outside the text
    # a selection: only the stages asked for
    assert sorted(model.run(tokens=[1, 2, 3], stages="probs").keys()) == sorted(
        ["tokens"] + [f"layers.{l}.probs" for l in range(4)])


def test_two_threads_run_two_models_at_once(models):
    want = {k: attnviz.Model(models[k]).run(tokens=TOKENS)["logits"].copy() for k in ("softmax", "short_conv")}
    got, errors = {}, []

    def work(kind):
        try:
            m = attnviz.Model(models[kind])
            for _ in range(3):
                got[kind] = m.run(tokens=TOKENS)["logits"].copy()
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in want]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in want:
        assert np.array_equal(got[k], want[k]), k
