// Regenerates expected-extra.json: the ids (and decoded text) that Hugging Face's
// `tokenizers` library (Rust, through its Node binding) gives for every tokenizer in
// variants.json on every text in texts.json and extra-texts.json, with and without special
// tokens. Run from this folder:
//   npm install @anush008/tokenizers @anush008/tokenizers-linux-x64-gnu   (in any folder)
//   NODE_PATH=<that folder>/node_modules node make-expected.js > expected-extra.json
const { Tokenizer } = require('@anush008/tokenizers');
const fs = require('fs');
const os = require('os');
const path = require('path');
const dir = __dirname;
const texts = JSON.parse(fs.readFileSync(dir + '/texts.json', 'utf8'))
  .concat(JSON.parse(fs.readFileSync(dir + '/extra-texts.json', 'utf8')));
const variants = JSON.parse(fs.readFileSync(dir + '/variants.json', 'utf8'));
function setPath(obj, dotted, value) {
  const keys = dotted.split('.');
  let o = obj;
  for (const k of keys.slice(0, -1)) o = o[k];
  o[keys[keys.length - 1]] = value;
}
(async () => {
  const out = { texts };
  for (const [name, v] of Object.entries(variants)) {
    if (name.startsWith('_')) continue;
    const j = JSON.parse(fs.readFileSync(dir + '/' + v.base, 'utf8'));
    for (const [k, val] of Object.entries(v.set)) setPath(j, k, val);
    const tmp = path.join(os.tmpdir(), 'variant-' + name + '.json');
    fs.writeFileSync(tmp, JSON.stringify(j));
    const tk = Tokenizer.fromFile(tmp);
    out[name] = [];
    for (const t of texts) {
      const e = await tk.encode(t, null, { addSpecialTokens: true });
      const n = await tk.encode(t, null, { addSpecialTokens: false });
      const ids = e.getIds();
      out[name].push({ ids, ids_no_special: n.getIds(), decoded: await tk.decode(ids, false) });
    }
    fs.unlinkSync(tmp);
  }
  console.log(JSON.stringify(out));
})();
