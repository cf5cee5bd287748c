#!/usr/bin/env bash
# Regenerates every image in README.md and docs/ from a built tree, so they can follow the
# GUI when it changes:
#   scripts/make-docs-images.sh [BUILD_DIR] [NAME...]
# BUILD_DIR defaults to build (it needs app/attnviz and app/attnviz-cli). With NAMEs (file
# names in docs/, e.g. screenshot.png) only those are made. GUI images are the application's
# own --screenshot under Xvfb (1920x1200 screen, the default 1600x1000 window unless a
# --size is given); heatmaps and filmstrips are attnviz-cli's export and train --filmstrip.
# Needs xvfb-run and python3 (the crop below uses only its standard library). The training images train the classroom preset (about a minute each on 2 cores).
# Look at every image after running it: the captions in README.md and docs/ describe them.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
app=$build/app/attnviz
cli=$build/app/attnviz-cli
for b in "$app" "$cli"; do
  [ -x "$b" ] || { echo "make-docs-images: $b not found; build first (cmake --build $build)" >&2; exit 1; }
done
only=("$@")
wanted() {  # wanted NAME: true when no names were given or NAME is one of them
  [ ${#only[@]} -eq 0 ] && return 0
  local n; for n in "${only[@]}"; do [ "$n" = "$1" ] && return 0; done; return 1
}
# A fixed work folder: the model paths it makes show in the screenshots (/tmp/attnviz-docs/g3).
work=${TMPDIR:-/tmp}/attnviz-docs
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
# A fresh settings folder: no saved layout or model from the user's own sessions.
export XDG_CONFIG_HOME="$work/config" XDG_CACHE_HOME="$work/cache"
gui() { xvfb-run -a -s "-screen 0 1920x1200x24" "$app" "$@" >"$work/gui.log" 2>&1 || { cat "$work/gui.log" >&2; exit 1; }; }
# shot NAME ARGS...: the GUI's screenshot (its .json sidecar stays in the work folder) as docs/NAME.
shot() { local name=$1; shift; gui "$@" --screenshot "$work/$name" && cp "$work/$name" "docs/$name"; }
made() { echo "docs/$1"; }
# crop_png IN X Y W H OUT: cut a rectangle out of an 8-bit RGB/RGBA PNG (the screenshots).
crop_png() {
  python3 - "$@" <<'PY'
import struct, sys, zlib
src, x, y, w, h, dst = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6]
data = open(src, "rb").read()
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR": ihdr = body
    if kind == b"IDAT": idat += body
    pos += 12 + n
W, H, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", ihdr)
assert depth == 8 and ctype in (2, 6) and not interlace, "crop_png: 8-bit RGB(A) only"
bpp = 3 if ctype == 2 else 4
raw, stride, prev, rows = zlib.decompress(idat), W * bpp, bytearray(W * bpp), []
for r in range(y + h):
    f, line = raw[r * (stride + 1)], bytearray(raw[r * (stride + 1) + 1:(r + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    prev = line
    if r >= y: rows.append(b"\0" + bytes(line[x * bpp:(x + w) * bpp]))
chunk = lambda k, b: struct.pack(">I", len(b)) + k + b + struct.pack(">I", zlib.crc32(k + b))
out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0))
open(dst, "wb").write(out + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b""))
PY
}
cat2="The cat sat on the mat. The cat sat on the mat."
cat3="The cat sat on the mat. The cat sat on the mat. The cat sat on the mat."
letters="vkgpdmwbfz vkgpdmwbfz"

# README: the main window on the built-in model, the induction head selected.
if wanted screenshot.png; then
  shot screenshot.png --model builtin:fortunes-en --text "$cat2" --layer 1 --head 4 --stage probs
  made screenshot.png
fi

# The Classroom layout at a projector's size (the size gui_layout.sh checks), the lesson at
# its softmax step.
if wanted presentation-1280x720.png; then
  ATTNVIZ_LESSON_STEP=6 shot presentation-1280x720.png --model builtin:fortunes-en --layout classroom --size 1280x720 \
    --layer 1 --head 4 --text "$cat2"
  made presentation-1280x720.png
fi

# The Research layout: the text view, the logit lens, the attribution and the comparison as
# tiles beside the heatmap.
if wanted research-1600x1000.png; then
  shot research-1600x1000.png --model builtin:fortunes-en --layout research --text-view --lens --attribution --compare \
    --other "The dog sat on the mat. The dog sat on the mat." --layer 1 --head 4 --text "$cat2"
  made research-1600x1000.png
fi

# export: one head of poems-zh, every head of fortunes-en.
if wanted export-poems-zh.png; then
  "$cli" export --model builtin:poems-zh --text "床前明月光，疑是地上霜。" --layer 1 --head 2 --cell 30 \
    --out docs/export-poems-zh.png
  made export-poems-zh.png
fi
if wanted export-fortunes-en-grid.png; then
  "$cli" export --model builtin:fortunes-en --text "$cat2" --layer all --head all --cell 5 \
    --out docs/export-fortunes-en-grid.png
  made export-fortunes-en-grid.png
fi

# A random 2-layer GPT-2-small with GPT-2's own tokenizer: byte-level tokens in the strip.
if wanted tokens-gpt2-bpe.png; then
  "$cli" random --preset gpt2-small --layers 2 --tokenizer tests/data/tokenizers/gpt2.tokenizer.json \
    --out "$work/gpt2r" >/dev/null 2>&1
  shot tokens-gpt2-bpe.png --model "$work/gpt2r" --text "Hello world! 龘 is one character, two GPT-2 tokens."
  made tokens-gpt2-bpe.png
fi

# Local and global layers: a Gemma-3-shaped random model (window 4), cropped by block_size 16
# (the same model and view as tests/gui_window_band.sh).
if wanted window-band.png; then
  "$cli" random --preset tiny --layers 1 --out "$work/tiny" >/dev/null 2>&1
  /usr/bin/python3 tests/gui_gemma3_model.py "$work/g3" "$work/tiny" >/dev/null 2>&1
  shot window-band.png --model "$work/g3" --text "the cat sat on the mat, the cat ate" --layer 0 --stage probs \
    --block-size 16
  made window-band.png
fi

# A hybrid: a random Qwen3.5-shaped model (8 layers, 6 of them gated-delta-rule linear
# attention, 512 wide, GPT-2's tokenizer). Layer 1 head 4 is a linear layer's head whose A
# has clearly negative entries on this text (found by dumping every linear head's A); the
# head grid beside it holds the full layers' softmax, the GQA panel the state beside the cache.
if wanted hybrid-qwen35.png; then
  "$cli" random --preset qwen3.5-0.8b --layers 8 --embd 512 --vocab 50257 \
    --tokenizer tests/data/tokenizers/gpt2.tokenizer.json --out "$work/q35" >/dev/null 2>&1
  shot hybrid-qwen35.png --model "$work/q35" --layer 1 --head 4 --stage implicit \
    --text "The cat sat on the mat. The cat sat on the mat because it was warm, and the dog sat on the rug."
  made hybrid-qwen35.png
fi

# Head importance: the All heads and Head importance panels on the sentence typed three
# times, cut from the window (the two panels fill the right column's top 464 x 535 pixels).
if wanted importance-fortunes-en.png; then
  gui --model builtin:fortunes-en --text "$cat3" --layer 1 --head 4 --screenshot "$work/importance.png"
  crop_png "$work/importance.png" 1136 163 464 535 docs/importance-fortunes-en.png
  made importance-fortunes-en.png
fi

# The Training panel after the classroom preset, and the filmstrip of its induction head
# (layer 1 head 3 with the preset's seed 1 and its 1600 steps; docs/lesson.md has the measurements).
if wanted training-panel.png; then
  shot training-panel.png --train-steps 1600 --text "$letters" --layer 1 --head 3
  made training-panel.png
fi
if wanted filmstrip-induction-head.png; then
  "$cli" train --preset induction-head --out "$work/run" --filmstrip 1:3 --text "$letters" \
    --every 300 --cell 10 --filmstrip-out docs/filmstrip-induction-head.png >"$work/train.log" 2>&1 \
    || { cat "$work/train.log" >&2; exit 1; }
  made filmstrip-induction-head.png
fi

# A long text: the first 4,400 characters of the GPL (one token per byte) on a random
# Qwen2.5-0.5B-shaped model (2 of its layers, a 512-token vocabulary), block_size 4096.
# The heatmap zoomed to 6 px per cell around token 3000 (the minimap shows where), and the
# text view of query 4000.
if wanted long-heatmap-4096.png || wanted long-text-view-4096.png; then
  "$cli" random --preset qwen2.5-0.5b --layers 2 --vocab 512 --out "$work/q05" >/dev/null 2>&1
  long=$(head -c 4400 /usr/share/common-licenses/GPL-3)
  if wanted long-heatmap-4096.png; then
    shot long-heatmap-4096.png --model "$work/q05" --text "$long" --block-size 4096 --layer 1 --head 3 \
      --heatmap-zoom 6 --heatmap-center 3000
    made long-heatmap-4096.png
  fi
  if wanted long-text-view-4096.png; then
    shot long-text-view-4096.png --model "$work/q05" --text "$long" --block-size 4096 --layer 1 --head 3 \
      --text-view --query 4000
    made long-text-view-4096.png
  fi
fi

# The text view shaded by logit attribution on the built-in model: layer 1 head 4, an
# induction head, carries the logit of 'a' after "…on the m" from the 'a' that followed "m"
# before. Cropped to the text view.
if wanted text-view-attribution.png; then
  gui --model builtin:fortunes-en --text "The cat sat on the mat. The dog ate the fish. The cat sat on the m" \
    --layer 1 --head 4 --text-view-attribution --screenshot "$work/tva.png"
  crop_png "$work/tva.png" 400 602 736 150 docs/text-view-attribution.png
  made text-view-attribution.png
fi

# The logit lens and the direct logit attribution on the built-in model (its last token).
if wanted lens-attribution.png; then
  shot lens-attribution.png --model builtin:fortunes-en --text "$cat2" --layer 1 --head 4 --lens --attribution
  made lens-attribution.png
fi

# Two prompts on the built-in model: the Compare prompts panel (A − B for layer 1 head 4)
# and the activation patching grid of the heads (B's head outputs put into A's run).
if wanted two-prompts-patching.png; then
  shot two-prompts-patching.png --model builtin:fortunes-en --text "$cat2" \
    --other "The cat sat on the mat. The dog sat on the mat." --layer 1 --head 4 --compare --patching
  made two-prompts-patching.png
fi

# Why a head attends, on the built-in model: "Why this score" on the induction cell of layer 1
# head 2 (the second 'm' of "the moon is the moon" attends to the 'o' after the first), and
# the Head scan of the shipped corpus (previous-token × induction) with layer 1 head 2's
# examples.
if wanted why-this-score.png; then
  shot why-this-score.png --model builtin:fortunes-en --text "the moon is the moon" --layer 1 --head 2 --query 16 \
    --key 5 --why --circuits
  made why-this-score.png
fi
if wanted gpt-oss.png; then
  # GPT-OSS's learned sinks and experts, on the small random model its PyTorch check writes.
  /usr/bin/python3 tests/reference/gpt_oss_parity.py --write-model "$work/gpt-oss" \
    --tokenizer tests/data/tokenizers/qwen3-12k.tokenizer.json >/dev/null
  shot gpt-oss.png --model "$work/gpt-oss" --text "the cat sat on the mat and the cat sat on the mat" --layer 0 \
    --head 1 --stage probs --experts
  made gpt-oss.png
fi
if wanted head-scan.png; then
  shot head-scan.png --model builtin:fortunes-en --text "the moon is the moon" --layer 1 --head 2 --scan
  made head-scan.png
fi
if wanted model-browser.png; then
  # File → Open model over stores made here in a scratch HOME: three Ollama models (small
  # random GGUF files of real architectures) and a manifest whose blob is gone, a Hugging
  # Face snapshot, and an LM Studio file.
  home="$work/home"
  mkdir -p "$home/.ollama/models/blobs" "$home/.lmstudio/models/acme/tiny-GGUF"
  ollama() {  # ollama NAME TAG FILE: FILE as the blob of NAME:TAG
    local d; d=$(sha256sum "$3" | cut -c1-64)
    cp "$3" "$home/.ollama/models/blobs/sha256-$d"
    mkdir -p "$home/.ollama/models/manifests/registry.ollama.ai/library/$1"
    printf '{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":1}]}' \
      "$d" > "$home/.ollama/models/manifests/registry.ollama.ai/library/$1/$2"
  }
  "$cli" random --preset gemma3-1b --layers 2 --embd 128 --heads 4 --vocab 300 --gguf Q4_K --out "$work/s1" >/dev/null
  "$cli" random --preset qwen2.5-0.5b --layers 2 --embd 128 --heads 4 --vocab 300 --gguf Q8_0 --out "$work/s2" >/dev/null
  "$cli" random --preset llama-small --layers 2 --embd 128 --heads 4 --vocab 300 --gguf F16 --out "$work/s3" >/dev/null
  "$cli" random --preset smollm2-135m --layers 3 --vocab 300 --out "$work/s4" >/dev/null
  ollama gemma3 1b "$work/s1/model.gguf"
  ollama qwen2.5 0.5b "$work/s2/model.gguf"
  ollama llama3.2 latest "$work/s3/model.gguf"
  mkdir -p "$home/.ollama/models/manifests/registry.ollama.ai/library/llava"
  printf '{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":1}]}' \
    "$(printf 'f%.0s' $(seq 64))" > "$home/.ollama/models/manifests/registry.ollama.ai/library/llava/latest"
  hub="$XDG_CACHE_HOME/huggingface/hub/models--HuggingFaceTB--SmolLM2-135M"
  mkdir -p "$hub/refs" "$hub/snapshots"
  printf '%s' "$(printf 'c%.0s' $(seq 40))" > "$hub/refs/main"
  cp -r "$work/s4" "$hub/snapshots/$(printf 'c%.0s' $(seq 40))"
  cp "$work/s2/model.gguf" "$home/.lmstudio/models/acme/tiny-GGUF/tiny-Q8_0.gguf"
  HOME="$home" shot model-browser.png --model builtin:fortunes-en --text "the cat sat on the mat" --browser
  made model-browser.png
fi
if wanted chat.png; then
  # Chat mode: a random model with the qwen3-12k tokenizer and Qwen2.5's chat template
  # (../shared/chat-templates), four turns and the generation prompt.
  "$cli" random --preset tiny --layers 2 --vocab 12288 --tokenizer tests/data/tokenizers/qwen3-12k.tokenizer.json \
    --out "$work/chat" >/dev/null
  cp ../shared/chat-templates/qwen2.5.jinja "$work/chat/chat_template.jinja"
  cat > "$work/chat.json" <<'JSON'
[{"role": "system", "content": "You are brief."},
 {"role": "user", "content": "Where did the cat sit?"},
 {"role": "assistant", "content": "On the mat."},
 {"role": "user", "content": "And then?"}]
JSON
  shot chat.png --model "$work/chat" --chat "$work/chat.json" --layer 1 --head 3
  made chat.png
fi
