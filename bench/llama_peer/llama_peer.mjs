// llama.cpp, through node-llama-cpp's prebuilt CPU binary, as a speed peer for attnviz on the
// same GGUF file (scripts/perf_table.py --sections llama; docs/performance.md). A benchmark
// peer only: nothing in attnviz's build or tests needs it.
//
// Install once (into bench/llama_peer/node_modules, which git ignores; the version is pinned
// in package.json and package-lock.json; --omit=optional skips the CUDA/Vulkan/other-OS
// binaries, and npm runs no install script, so nothing is downloaded or compiled):
//   cd bench/llama_peer && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --omit=optional
// Run:
//   node bench/llama_peer/llama_peer.mjs --model FILE.gguf --threads 2 --prompt-tokens 512 --reps 3 --json
//
// What it times, on one context sequence, per repetition (after one untimed warm-up):
//   pp:     a fixed prompt of --prompt-tokens ids evaluated from an empty KV cache, in one batch,
//           with the last position's logits computed (as llama-bench's pp and attnviz's
//           `bench --last-logits` full pass);
//   decode: one more token evaluated after that prompt through the KV cache, its logits
//           computed and the next token picked greedily (argmax: no sampling chain);
//   decode_no_logits: the same one token with no output row asked for (llama.cpp then skips
//           the output projection to the vocabulary), for reference.
// The prompt ids come from a seeded generator (mulberry32, seed 1) below the vocabulary
// size, so no tokenizer is needed and every run and every file of one vocabulary sees the
// same ids. Prints medians (ms) over --reps.
//
// Choices: CPU only (getLlama({gpu: false}), prebuilt binaries only, never a build); the
// weights are read into memory at load (useMmap: false), so no timing includes page faults
// of the mapping; flash attention off (llama-bench's default); --threads for both the
// batch and the single-token evaluation; context of prompt + 8 tokens, batch = the prompt.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// node-llama-cpp's own version, from the package.json above its resolved entry point.
function nodeLlamaCppVersion() {
  let d = dirname(fileURLToPath(import.meta.resolve("node-llama-cpp")));
  for (; d !== dirname(d); d = dirname(d)) {
    const f = join(d, "package.json");
    if (existsSync(f)) {
      const p = JSON.parse(readFileSync(f, "utf8"));
      if (p.name === "node-llama-cpp") return p.version;
    }
  }
  return "unknown";
}

function parseArgs(argv) {
  const o = { model: null, threads: 2, promptTokens: 512, reps: 3, json: false, seed: 1, top: 0 };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i], next = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    const int = (s) => {
      const v = Number(s);
      if (!Number.isInteger(v) || v <= 0) usage(`${a}: expected a positive integer, got '${s}'`);
      return v;
    };
    if (a === "--model") o.model = next();
    else if (a === "--threads") o.threads = int(next());
    else if (a === "--prompt-tokens") o.promptTokens = int(next());
    else if (a === "--reps") o.reps = int(next());
    else if (a === "--seed") o.seed = int(next());
    else if (a === "--json") o.json = true;
    else if (a === "--top-logits") o.top = int(next());
    else if (a === "--help" || a === "-h") usage(null);
    else usage(`unknown option '${a}'`);
  }
  if (!o.model) usage("--model FILE.gguf is required");
  return o;
}

function usage(err) {
  const text = "usage: node llama_peer.mjs --model FILE.gguf [--threads 2] [--prompt-tokens 512] [--reps 3] [--seed 1] [--top-logits K] [--json]";
  if (err) {
    console.error(`llama_peer: ${err}\n${text}`);
    process.exit(2);
  }
  console.log(text);
  process.exit(0);
}

// mulberry32: a small seeded generator, so the prompt is the same everywhere.
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const median = (a) => {
  const s = [...a].sort((x, y) => x - y), n = s.length;
  return n % 2 ? s[n >> 1] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

async function main() {
  const o = parseArgs(process.argv.slice(2));
  try {
    statSync(o.model);
  } catch (e) {
    console.error(`llama_peer: cannot open '${o.model}': ${e.message}`);
    process.exit(1);
  }
  const llama = await getLlama({
    gpu: false,
    build: "never",
    usePrebuiltBinaries: true,
    skipDownload: true,
    maxThreads: o.threads,
    logLevel: LlamaLogLevel.error,
  });
  const model = await llama.loadModel({ modelPath: o.model, gpuLayers: 0, useMmap: false, useMlock: false });
  const meta = model.fileInfo.metadata;
  const arch = meta.general?.architecture;
  const nVocab = meta.tokenizer?.ggml?.tokens?.length ?? meta[arch]?.vocab_size;
  if (!nVocab) throw new Error("the file names no vocabulary size (tokenizer.ggml.tokens)");
  const rand = mulberry32(o.seed);
  const prompt = Array.from({ length: o.promptTokens }, () => Math.floor(rand() * nVocab));
  const extra = Math.floor(rand() * nVocab);

  const context = await model.createContext({
    contextSize: o.promptTokens + 8,
    batchSize: o.promptTokens,
    sequences: 1,
    threads: { ideal: o.threads, min: o.threads },
    flashAttention: false,
  });
  const seq = context.getSequence();
  const greedy = { generateNext: { token: true, options: { temperature: 0 } } };
  const withLogits = (ids) => ids.map((id, i) => (i === ids.length - 1 ? [id, greedy] : id));

  const pp = [], decode = [], decodeNoLogits = [];
  let nextAfterPrompt = null;
  for (let r = 0; r <= o.reps; ++r) {  // r = 0: warm-up, not counted
    await seq.clearHistory();
    let t0 = nowMs();
    const ppOut = await seq.controlledEvaluate(withLogits(prompt));
    const tPp = nowMs() - t0;
    nextAfterPrompt = ppOut[prompt.length - 1]?.next?.token ?? null;
    t0 = nowMs();
    const out = await seq.controlledEvaluate(withLogits([extra]));
    const tDecode = nowMs() - t0;
    if (out[0]?.next?.token == null) throw new Error("no token came back from the decode step");
    // The same position again without an output row: erase the token, evaluate it bare.
    await seq.eraseContextTokenRanges([{ start: o.promptTokens, end: o.promptTokens + 1 }]);
    t0 = nowMs();
    await seq.evaluateWithoutGeneratingNewTokens([extra]);
    const tBare = nowMs() - t0;
    if (r > 0) pp.push(tPp), decode.push(tDecode), decodeNoLogits.push(tBare);
    if (!o.json) console.error(`rep ${r}${r ? "" : " (warm-up)"}: pp ${tPp.toFixed(1)} ms, decode ${tDecode.toFixed(2)} ms, decode without logits ${tBare.toFixed(2)} ms`);
  }
  const rel = llama.llamaCppRelease;
  // --top-logits K: the K largest logits after the prompt (untimed), to check that attnviz
  // reads the file alike (attnviz-cli dump --tokens <the prompt_ids> --stages logits).
  let topLogits;
  if (o.top > 0) {
    await seq.clearHistory();
    const last = [prompt[prompt.length - 1], { generateNext: { logits: { filter: { includeTop: o.top } } } }];
    const out = await seq.controlledEvaluate([...prompt.slice(0, -1), last]);
    topLogits = [...out[prompt.length - 1].next.logits.entries()].sort((x, y) => y[1] - x[1]).slice(0, o.top);
  }
  const result = {
    model: o.model,
    threads: o.threads,
    prompt_tokens: o.promptTokens,
    pp_median_ms: median(pp),
    decode_median_ms: median(decode),
    decode_no_logits_median_ms: median(decodeNoLogits),
    pp_ms: pp,
    decode_ms: decode,
    reps: o.reps,
    next_token: nextAfterPrompt,  // the greedy next token after the prompt (a check that both programs read the file alike)
    n_vocab: nVocab,
    ...(o.top > 0 ? { prompt_ids: prompt, top_logits: topLogits } : {}),
    architecture: arch,
    file_bytes: statSync(o.model).size,
    node_llama_cpp_version: nodeLlamaCppVersion(),
    llama_cpp_build: `${rel.repo} ${rel.release} (${llama.buildType}, gpu: ${llama.gpu})`,
    system_info: llama.systemInfo,
    peak_rss_mb: process.resourceUsage().maxRSS / 1024,
    mmap: model.useMmap,
    flash_attention: false,
  };
  if (o.json) console.log(JSON.stringify(result));
  else console.log(`pp${o.promptTokens}: ${result.pp_median_ms.toFixed(1)} ms, decode: ${result.decode_median_ms.toFixed(2)} ms (median of ${o.reps}, ${o.threads} threads, ${result.llama_cpp_build})`);
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  console.error(`llama_peer: ${e?.stack ?? e}`);
  process.exit(1);
});
