// Writes tests/data/tokenizer_js_vectors.inc: expected GPT-2 token ids for hand-chosen
// inputs, from the independent JavaScript implementation gpt-3-encoder@1.1.4.
//
//   cd /tmp && npm pack gpt-3-encoder@1.1.4 && mkdir -p gpt-3-encoder && tar xzf gpt-3-encoder-1.1.4.tgz -C gpt-3-encoder
//   node tests/data/tokenizer_make_vectors.js /tmp/gpt-3-encoder/package > tests/data/tokenizer_js_vectors.inc
//
// GPT-2's reference splits text with the Python `regex` module, whose \s is the
// Unicode White_Space property; JavaScript's \s differs (it has U+FEFF, lacks U+0085).
// So each input is also split by python3's `regex` with GPT-2's pattern. Where the
// splits agree, the ids are encode(text). Where they differ, the ids are the
// concatenation of encode(piece) over the Python pieces (BPE works on each piece
// alone, so this is GPT-2's answer), and the vector is marked "python split".
// "<|endoftext|>" with allow_special: the text around each one is encoded alone and
// 50256 put in between (gpt-3-encoder has no special tokens).
//
//   node tests/data/tokenizer_make_vectors.js /tmp/gpt-3-encoder/package --count .cache/data/moby-dick/moby-dick.txt
// prints the token count and id sum of a whole file. gpt-3-encoder's encode() is
// quadratic in its output, so the file is encoded in chunks of about 2000 characters,
// each cut before a "\n" that follows a non-space: the pattern has no lookbehind and
// no match spans such a point (for Moby-Dick, Python's regex gives the same pieces).
'use strict';
const {execFileSync} = require('child_process');
const path = require('path');
const {encode} = require(path.resolve(process.argv[2], 'Encoder.js'));

const EOT = '<|endoftext|>';
const JS_PATTERN = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

// [text, allow_special, what it covers]
function printCountOfFile(file) {
  const text = require('fs').readFileSync(file, 'utf-8');
  let count = 0;
  let sum = 0;
  for (let begin = 0; begin < text.length;) {
    let end = Math.min(begin + 2000, text.length);
    while (end < text.length && !(text[end] === '\n' && /\S/u.test(text[end - 1]))) ++end;
    for (const id of encode(text.slice(begin, end))) {
      ++count;
      sum += id;
    }
    begin = end;
  }
  process.stdout.write(`${count} tokens, id sum ${sum}\n`);
}

const inputs = [
  ['', false, 'empty string'],
  ['hello', false, 'one token'],
  // Letters and numbers of many scripts.
  ['Ελληνικά γράμματα', false, 'Greek'],
  ['Кириллица и латиница', false, 'Cyrillic'],
  ['עברית ועוד', false, 'Hebrew'],
  ['العربية ١٢٣٤ 5678', false, 'Arabic letters, Arabic-Indic digits'],
  ['हिन्दी भाषा', false, 'Devanagari: vowel signs are marks, not letters'],
  ['日本語のテキスト、カタカナ。', false, 'CJK, Hiragana, Katakana, CJK punctuation'],
  ['한국어 텍스트', false, 'Hangul'],
  ['ภาษาไทย ๑๒๓', false, 'Thai letters, marks and digits'],
  ['ქართული ენა', false, 'Georgian'],
  ['Ⅻ ⅻ ½ ¼ ² ³', false, 'letter numbers Nl and other numbers No'],
  ['①②③ ⑴⑵', false, 'circled and parenthesised numbers'],
  ['𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟘𝟙𝟚', false, 'astral letters and digits (math alphanumerics)'],
  ['𐌰𐌱𐌲 Gothic', false, 'astral script'],
  ['ǅemal ǈ Ǌ', false, 'titlecase letters Lt'],
  ['ʰʲˢ modifier', false, 'modifier letters Lm'],
  ['ℌℑ℘ ℃ ™', false, 'letterlike symbols: letters and symbols'],
  ['߀߁߂ ꘠꘡', false, "N'Ko and Vai digits"],
  ['Straße ẞ İstanbul ı ﬁ ﬂ', false, 'special casing letters and ligatures'],
  // Combining marks (Mn/Mc are neither letters nor numbers).
  ['cafe\u0301 nai\u0308ve', false, 'decomposed accents'],
  ['Z\u0351\u0300a\u0315l\u0300g\u0358o', false, 'zalgo marks'],
  ['\u0301\u0302 leading marks', false, 'marks at the start'],
  ['naïve café résumé', false, 'precomposed accents'],
  // Whitespace.
  ['a  b', false, 'two spaces'],
  ['a   b', false, 'three spaces'],
  ['a\tb a\t\tb', false, 'tabs'],
  ['line1\nline2\n\nline3', false, 'newlines'],
  ['trailing spaces   ', false, 'trailing spaces'],
  ['trailing newline\n', false, 'trailing newline'],
  ['\n\n\n', false, 'only newlines'],
  ['   ', false, 'only spaces'],
  [' leading space', false, 'leading space'],
  ['  two leading', false, 'two leading spaces'],
  ['\t tab then space', false, 'tab then space before a word'],
  ['a \t b', false, 'space tab space'],
  ['x\r\ny\r\n', false, 'CRLF'],
  ['word \n next', false, 'space before newline'],
  ['nbsp\u00a0word and\u00a0\u00a0two', false, 'no-break spaces (White_Space)'],
  ['ideographic\u3000space em\u2003space thin\u2009space', false, 'other Unicode spaces'],
  ['line\u2028sep\u2029para', false, 'line and paragraph separators'],
  ['\u000b\u000c vertical tab form feed', false, 'VT and FF'],
  ['sep\u001c\u001d\u001e\u001f', false, 'U+001C..U+001F are not White_Space'],
  ['zero\u200bwidth \u200b', false, 'zero width space is not White_Space'],
  ['a\u0085\u0085b c \u0085', false, 'U+0085 NEL is White_Space in Python regex, not in JS'],
  ['\ufeffBOM a \ufeff\ufeffb', false, 'U+FEFF is \\s in JS only'],
  ['x  \n\n  y', false, 'mixed whitespace run before a word'],
  // Contractions.
  ["I'm you're we've they'll he'd she's it's can't", false, 'contractions'],
  ["I'M YOU'RE WE'VE THEY'LL HE'D SHE'S IT'S CAN'T", false, 'uppercase: not contractions'],
  ["'s 't 're 've 'm 'll 'd", false, 'bare contractions'],
  ["'sam 'tis 'reading 'velvet 'mall 'llama 'dog", false, 'contraction then more letters'],
  ["rock'n'roll o'clock", false, 'apostrophes inside words'],
  ["''s ''' x's'", false, 'apostrophe runs'],
  ['it’s curly’s', false, 'curly apostrophe is no contraction'],
  [" 's !'s ?'ll", false, 'space or punctuation before a contraction'],
  // Digits and numbers.
  ['1234567890123456789012345678901234567890', false, 'long number'],
  ['3.14159 2,718 1e10 0x1F -42 +7', false, 'number formats'],
  ['phone 555-0123 and 2024/01/01', false, 'digit groups'],
  ['abc123def456 ２０２４', false, 'letters and digits, fullwidth digits'],
  // Punctuation and symbols.
  ['!!!??? ... --- *** ;;;', false, 'punctuation runs'],
  ['Hello,world.foo;bar:baz', false, 'punctuation between words'],
  ['<html><body>&amp;&lt;</body></html>', false, 'markup'],
  ["def f(x): return {'a': [1, 2]}  # comment", false, 'code'],
  ['"quoted" «guillemets» „German“', false, 'quotes'],
  ['@user #hashtag $100 %20 ^_^ ~tilde~ `code`', false, 'symbols'],
  ['email@example.com https://example.com/path?q=1&r=2', false, 'e-mail and URL'],
  ['x²+y²=z² ½ cup', false, 'superscripts'],
  ['\u0000\u0001\u007f controls', false, 'control characters'],
  // Emoji.
  ['👍🏽 skin tone', false, 'emoji with skin tone modifier'],
  ['👨\u200d👩\u200d👧\u200d👦 family', false, 'ZWJ sequence'],
  ['🏳\ufe0f\u200d🌈 rainbow flag', false, 'flag ZWJ sequence with variation selector'],
  ['🇯🇵🇺🇸 flags', false, 'regional indicator flags'],
  ['❤\ufe0f ✨ 🎉🎊', false, 'emoji presentation selector'],
  ['text😀text', false, 'emoji inside a word'],
  ['1\ufe0f\u20e3 keycap', false, 'keycap sequence'],
  // Long words.
  ['Pneumonoultramicroscopicsilicovolcanoconiosis', false, 'long word'],
  ['supercalifragilisticexpialidocious'.repeat(10), false, 'run of 340 letters'],
  ['a'.repeat(200), false, 'one letter repeated'],
  ['ab'.repeat(150) + ' ' + '9'.repeat(120), false, 'repeated pair, long digit run'],
  // <|endoftext|>.
  [EOT, false, 'end of text as plain text'],
  [EOT, true, 'end of text, special'],
  ['Hello' + EOT + 'World', false, 'end of text between words, plain'],
  ['Hello' + EOT + 'World', true, 'end of text between words, special'],
  ['a ' + EOT + ' b', true, 'end of text between spaces, special'],
  [EOT + EOT, true, 'two end of texts, special'],
  ['<|endoftext', true, 'incomplete end of text is plain text'],
  ['The year 1984: Orwell\'s "Nineteen Eighty-Four".\n', false, 'mixed sentence'],
];

function pythonPieces(texts) {
  const script = [
    'import json, sys, regex',
    "pat = regex.compile(r\"\"\"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+\"\"\")",
    'print(json.dumps([pat.findall(t) for t in json.load(sys.stdin)]))',
  ].join('\n');
  return JSON.parse(execFileSync('python3', ['-c', script], {input: JSON.stringify(texts)}).toString());
}

function encodeText(text, allowSpecial) {
  const segments = allowSpecial ? text.split(EOT) : [text];
  return segments.flatMap((segment, i) => (i > 0 ? [50256] : []).concat(segment ? encode(segment) : []));
}

const hex = (n) => n.toString(16).padStart(2, '0');
function cppLiteral(text) {
  let out = '"';
  let afterHexEscape = false;
  const visible = /[\p{L}\p{N}\p{P}\p{S}]/u;
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    if (afterHexEscape && /[0-9a-fA-F]/.test(ch)) out += '" "';  // end the \x escape
    afterHexEscape = false;
    if (ch === '"' || ch === '\\') out += '\\' + ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if ((cp >= 0x20 && cp < 0x7f) || (cp > 0x7f && visible.test(ch))) out += ch;
    else {
      for (const byte of Buffer.from(ch, 'utf8')) out += '\\x' + hex(byte);
      afterHexEscape = true;
    }
  }
  return out + '"sv';
}

if (process.argv[3] === '--count') {
  printCountOfFile(process.argv[4]);
  process.exit(0);
}

const plainPieces = pythonPieces(inputs.map(([text]) => text));
const lines = [
  '// Generated by tests/data/tokenizer_make_vectors.js from gpt-3-encoder@1.1.4; do not edit.',
  '// {text, allow_special, expected ids, what it covers}',
];
let pythonSplits = 0;
inputs.forEach(([text, allowSpecial, note], index) => {
  let ids;
  const pieces = plainPieces[index];
  const jsPieces = Array.from(text.matchAll(JS_PATTERN), (m) => m[0]);
  if (allowSpecial || JSON.stringify(pieces) === JSON.stringify(jsPieces)) {
    ids = encodeText(text, allowSpecial);
  } else {
    for (const piece of pieces) {
      const matches = Array.from(piece.matchAll(JS_PATTERN), (m) => m[0]);
      if (matches.length !== 1) throw new Error(`piece ${JSON.stringify(piece)} is not one JS pre-token`);
    }
    ids = pieces.flatMap((piece) => encode(piece));
    note += ' (python split)';
    ++pythonSplits;
  }
  lines.push(`{${cppLiteral(text)}, ${allowSpecial}, {${ids.join(', ')}}, ${JSON.stringify(note)}},`);
});
process.stdout.write(lines.join('\n') + '\n');
process.stderr.write(`${inputs.length} vectors, ${pythonSplits} with the Python split\n`);
