// Hugging Face's tokenizers (Rust, through its Node binding) on the same texts and files as
// attnviz_bench_tokenizer, for the README's comparison:
//   ATTNVIZ_BENCH_TEXT_DIR=/tmp/t build/bench/attnviz_bench_tokenizer --benchmark_filter=Throughput
//   npm install @anush008/tokenizers @anush008/tokenizers-linux-x64-gnu   (in any folder)
//   NODE_PATH=<that folder>/node_modules node bench/hf_tokenizer_bench.js /tmp/t
// Prints MB/s (median of 5 runs after one warm-up) per tokenizer and text, and the time of
// one keystroke at the end of a 4000-token English text (the whole text encoded again).
const { Tokenizer } = require('@anush008/tokenizers');
const fs = require('fs');
const dir = process.argv[2];
const data = __dirname + '/../tests/data/tokenizers/';
const median = (a) => a.sort((x, y) => x - y)[a.length >> 1];
(async () => {
  for (const name of ['gpt2', 'spm32k', 'qwen3-12k']) {
    const tk = Tokenizer.fromFile(data + name + '.tokenizer.json');
    for (const lang of ['english', 'chinese']) {
      const text = fs.readFileSync(`${dir}/${lang}.txt`, 'utf8');
      const bytes = Buffer.byteLength(text);
      await tk.encode(text, null, { addSpecialTokens: true });
      const times = [];
      for (let r = 0; r < 5; ++r) {
        const t0 = process.hrtime.bigint();
        await tk.encode(text, null, { addSpecialTokens: true });
        times.push(Number(process.hrtime.bigint() - t0) / 1e9);
      }
      console.log(`${name} ${lang}: ${(bytes / 1048576 / median(times)).toFixed(2)} MB/s`);
    }
    // One keystroke on a ~4000-token text: encode the whole text again.
    let text = fs.readFileSync(`${dir}/english.txt`, 'utf8').slice(0, 20000);
    while ((await tk.encode(text, null, { addSpecialTokens: true })).getIds().length > 4000) text = text.slice(0, -64);
    const times = [];
    for (let r = 0; r < 200; ++r) {
      const t0 = process.hrtime.bigint();
      await tk.encode(text + 'word '.slice(0, r % 5 + 1), null, { addSpecialTokens: true });
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    console.log(`${name} keystroke at 4000 tokens: ${median(times).toFixed(3)} ms`);
  }
})();
