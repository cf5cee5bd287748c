"""attnviz in Python: run a causal transformer and read every recorded matrix.

    import attnviz
    model = attnviz.Model("builtin:fortunes-en")          # a directory, FILE.gguf, ollama:, hf:
    trace = model.run(text="The cat sat on the mat")
    trace["layers.0.probs"]                               # (H, T, T) numpy float32

Tensor names, shapes and types are the dump's (`attnviz-cli dump`, docs/cli.md). The
analyses return what the matching `attnviz-cli ... --json` prints, with every rectangular
list of numbers as a numpy array. Every failure raises attnviz.Error with the message the
CLI prints.
"""

import json as _json
import os as _os
import tempfile as _tempfile

import numpy as _np

from . import _attnviz

Error = _attnviz.Error

# Installed as PREFIX/lib/python3/dist-packages/attnviz/: the built-in models and shaders are in
# PREFIX/share/attnviz (from the build tree, the source tree's are found without this).
_prefix_data = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "..", "..", "..", "..", "share", "attnviz")
if _os.path.isdir(_prefix_data):
    _attnviz._add_data_dir(_os.path.normpath(_prefix_data))

__all__ = ["Model", "Trace", "Error", "HeatmapImage"]


def _arrays(value):
    """JSON lists of numbers (of any depth, rectangular) as numpy arrays; the rest as is."""
    if isinstance(value, dict):
        return {k: _arrays(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and _numeric(value):
            try:
                return _np.asarray(value)
            except ValueError:  # ragged: each part on its own
                pass
        return [_arrays(v) for v in value]
    return value


def _numeric(value):
    if isinstance(value, list):
        return bool(value) and all(_numeric(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_str(name, value):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def _check_tokens(tokens):
    if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__iter__"):
        raise TypeError(f"tokens must be a list of ints, not {type(tokens).__name__}")
    ids = []
    for t in tokens:
        if isinstance(t, bool) or not isinstance(t, (int, _np.integer)):
            raise TypeError(f"tokens must be a list of ints, and {t!r} is a {type(t).__name__}")
        ids.append(int(t))
    return ids


def _check_int(name, value, minimum=None):
    if isinstance(value, bool) or not isinstance(value, (int, _np.integer)):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise Error(f"{name}: {value} is less than {minimum}")
    return int(value)


def _list(name, value):
    """'0,2' or [0, 2] as the CLI's comma list."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    raise TypeError(f"{name} must be a str or a list, not {type(value).__name__}")


class HeatmapImage:
    """One recorded matrix as the PNG `attnviz-cli export` writes; Jupyter shows it inline."""

    def __init__(self, png, caption):
        self.png = png
        self.caption = caption

    def _repr_png_(self):
        return self.png

    def save(self, path):
        with open(path, "wb") as f:
            f.write(self.png)

    def __repr__(self):
        return f"<attnviz.HeatmapImage {self.caption}: {len(self.png)} bytes of PNG>"


class Trace:
    """What one run recorded. trace[NAME] is the dump's tensor NAME (numpy float32 or int32;
    read-only where the engine's buffer is lent)."""

    def __init__(self, native):
        self._t = native

    def keys(self):
        return list(self._t.keys())

    def __iter__(self):
        return iter(self.keys())

    def __contains__(self, name):
        return name in self._t.keys()

    def __len__(self):
        return len(self._t.keys())

    def __getitem__(self, name):
        _check_str("name", name)
        a = self._t.get(name)
        if a is None:
            raise KeyError(f"{name!r} is not in this trace (trace.keys() lists what is)")
        return a

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    @property
    def tokens(self):
        return list(self._t.tokens)

    @property
    def token_strings(self):
        return list(self._t.token_strings)

    @property
    def metadata(self):
        return dict(self._t.metadata)

    def attention(self):
        """One (1, H, T, T) array per softmax layer, in layer order: BertViz's head_view input
        (with trace.token_strings), and CircuitsVis's with [0]."""
        out = []
        for l in range(self._t.n_layer):
            if self._t.has_probs(l):
                name = f"layers.{l}.probs"
                if name not in self:
                    raise Error(f"{name} was not recorded: run with stages that include probs")
                p = self[name]
                out.append(p.reshape((1,) + p.shape))
        return out

    def show(self, layer=0, head=0, stage="probs", cell=24):
        """The matrix of one head as an image Jupyter renders (the PNG `export` writes)."""
        layer = _check_int("layer", layer, 0)
        head = _check_int("head", head, 0)
        _check_str("stage", stage)
        png = self._t.png(layer, head, stage, _check_int("cell", cell, 1))
        return HeatmapImage(png, f"layer {layer} · head {head} · {stage}")

    def __repr__(self):
        return f"<attnviz.Trace T={len(self.tokens)}, {len(self)} tensors>"


class _Tokenizer:
    def __init__(self, native):
        self._m = native

    def encode(self, text, add_special=True):
        return list(self._m.encode(_check_str("text", text), bool(add_special)))

    def decode(self, ids):
        return self._m.decode(_check_tokens(ids)).decode("utf-8", errors="replace")


class Model:
    """A model opened as attnviz-cli's --model opens it (a directory, FILE.gguf, builtin:NAME,
    ollama:NAME[:TAG], hf:ORG/NAME[@REV]). One engine: a run after a shorter one whose tokens
    it extends reuses the cache, as the GUI does while a person types."""

    def __init__(self, name, backend="cpu", arith=None, weights=None):
        self._name = _check_str("name", name)
        self._backend = _check_str("backend", backend)
        self._arith = None if arith is None else _check_str("arith", arith)
        self._weights = None if weights is None else _check_str("weights", weights)
        self._m = _attnviz._Model(self._name, self._backend, self._arith, self._weights)
        self.tokenizer = _Tokenizer(self._m)

    @property
    def name(self):
        return self._name

    @property
    def config(self):
        """What `attnviz-cli info --json` prints: sizes, heads, KV heads, head sizes, layer kinds."""
        info = _json.loads(self._m.info_json())
        info["family"] = info["model_type"]
        info["layers"] = info["n_layer"]
        info["heads"] = info["n_head"]
        info["kv_heads"] = info["n_kv_head"]
        info["layer_kinds"] = [s["mixer"] for s in info["layer_specs"]]
        return info

    def chat_template(self, messages, add_generation_prompt=True):
        """The text the model sees for `messages` (as `attnviz-cli chat` prints it)."""
        return self._m.chat_template(messages, bool(add_generation_prompt))

    def run(self, tokens=None, text=None, chat=None, block_size=None, stages=None, ablate=None, ablate_mode="zero"):
        if tokens is not None:
            tokens = _check_tokens(tokens)
        if text is not None:
            _check_str("text", text)
        if block_size is not None:
            block_size = _check_int("block_size", block_size, 1)
        if stages is not None:
            stages = _list("stages", stages)
        if ablate is not None:
            ablate = _list("ablate", ablate)
        _check_str("ablate_mode", ablate_mode)
        return Trace(self._m.run(tokens, text, chat, block_size, stages, ablate, ablate_mode))

    @property
    def last_recomputed_from(self):
        """The first position the last run computed (0: a full pass; more: the cache was reused)."""
        return self._m.last_recomputed_from

    # --- the analyses: attnviz-cli's own subcommands, their --json as Python objects

    def _cli(self, command, tokens=None, text=None, chat=None, extra=()):
        args = [command, "--model", self._name, "--json", "--backend", self._backend]
        if self._arith is not None:
            args += ["--arith", self._arith]
        if self._weights is not None:
            args += ["--weights", self._weights]
        given = sum(x is not None for x in (tokens, text, chat))
        chat_file = None
        try:
            if command != "scan":
                if given > 1 or (given == 0 and command != "heads"):  # heads alone: its random string
                    raise Error(f"{command}: give exactly one of tokens=[…], text=\"…\" or chat=[…]")
                if given == 0:
                    pass
                elif tokens is not None:
                    args += ["--tokens", ",".join(str(t) for t in _check_tokens(tokens))]
                elif text is not None:
                    args += ["--text", _check_str("text", text)]
                else:
                    fd, chat_file = _tempfile.mkstemp(suffix=".json", prefix="attnviz-chat-")
                    with _os.fdopen(fd, "w", encoding="utf-8") as f:
                        _json.dump(chat, f)
                    args += ["--chat", chat_file]
            args += [str(a) for a in extra]
            return _arrays(_attnviz._cli_json(args))
        finally:
            if chat_file:
                _os.unlink(chat_file)

    def lens(self, tokens=None, text=None, chat=None, top=None):
        extra = [] if top is None else ["--top", _check_int("top", top, 1)]
        return self._cli("lens", tokens, text, chat, extra)

    def heads(self, tokens=None, text=None, chat=None, dla=False, importance=False, composition=False,
              position=None, target=None):
        extra = []
        if dla:
            extra.append("--dla")
        if importance:
            extra.append("--importance")
        if composition:
            extra.append("--composition")
        if position is not None:
            extra += ["--position", _check_int("position", position, 0)]
        if target is not None:
            extra += ["--target", _check_str("target", target)]
        return self._cli("heads", tokens, text, chat, extra)

    def qk(self, layer, head, query, key, tokens=None, text=None, chat=None):
        extra = ["--layer", _check_int("layer", layer, 0), "--head", _check_int("head", head, 0),
                 "--query", _check_int("query", query, 0), "--key", _check_int("key", key, 0)]
        return self._cli("qk", tokens, text, chat, extra)

    def patch(self, text=None, other=None, tokens=None, other_tokens=None, heads=True, position=None,
              target=None):
        extra = ["--heads" if heads else "--resid"]
        if other is not None:
            extra += ["--other", _check_str("other", other)]
        if other_tokens is not None:
            extra += ["--other-tokens", ",".join(str(t) for t in _check_tokens(other_tokens))]
        if position is not None:
            extra += ["--position", _check_int("position", position, 0)]
        if target is not None:
            extra += ["--target", _check_str("target", target)]
        return self._cli("patch", tokens, text, None, extra)

    def scan(self, corpus, window=None, stride=None, top=None):
        """Every head's scores averaged over the windows of a corpus file (`attnviz-cli scan`)."""
        extra = ["--corpus", _check_str("corpus", corpus)]
        if window is not None:
            extra += ["--window", _check_int("window", window, 1)]
        if stride is not None:
            extra += ["--stride", _check_int("stride", stride, 1)]
        if top is not None:
            extra += ["--top", _check_int("top", top, 1)]
        try:
            return self._cli("scan", extra=extra)
        except Error as e:  # Ctrl-C: the scan stops at its next window and says so
            if str(e).startswith("the scan was interrupted"):
                raise KeyboardInterrupt(str(e)) from None
            raise

    def __repr__(self):
        return f"<attnviz.Model {self._name!r} on {self._m.backend_name}>"
