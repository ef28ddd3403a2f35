// Type-checks JSON bodies against Perplexity's official Node SDK (@perplexity-ai/perplexity_ai,
// whose types are generated from the API's OpenAPI description), with TypeScript's own
// checker: `--strict`, and for requests the excess-property check (an object literal typed
// as ResponseCreateParams may not carry a field the type lacks — what the live API answers
// with 400 `unknown field`).
//
//   node check.mjs IN.json OUT.json
//
// IN:  {"entries": [{"kind": KIND, "body": <JSON>}, ...]}
// OUT: {"results": [[message, ...] per entry, in order], "unplaced": [message, ...]}
//
// Kinds: requests `create`, `search` (typed literals: excess properties are errors);
// answers `create-response`, `retrieve`, `cancel`, `chunk`, `search-response` (checked
// through a generic, so a field the SDK lacks is allowed — answers may grow — but every
// field the type has must be of its type and every required one present).
//
// Each entry is written on lines of its own in a generated .ts file under .work/, and
// each diagnostic is attributed to the entry whose lines hold it.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const here = dirname(fileURLToPath(import.meta.url));
const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node check.mjs IN.json OUT.json');
  process.exit(2);
}

const SDK = '@perplexity-ai/perplexity_ai';
const TYPES = {
  create: { type: 'ResponseCreateParams', literal: true },
  search: { type: 'SearchCreateParams', literal: true },
  // The SDK adds `output_text` after parsing (lib/add-output-text.ts): not on the wire.
  'create-response': { type: "Omit<ResponseCreateResponse, 'output_text'>", literal: false },
  retrieve: { type: "Omit<ResponseRetrieveResponse, 'output_text'>", literal: false },
  cancel: { type: 'ResponseCancelResponse', literal: false },
  chunk: { type: 'ResponseStreamChunk', literal: false },
  'search-response': { type: 'SearchCreateResponse', literal: false },
};

const { entries } = JSON.parse(readFileSync(input, 'utf8'));
const lines = [
  `import type { ResponseCancelResponse, ResponseCreateParams, ResponseCreateResponse, ResponseRetrieveResponse, ResponseStreamChunk } from '${SDK}/resources/responses/responses';`,
  `import type { SearchCreateParams, SearchCreateResponse } from '${SDK}/resources/search';`,
  // An answer: `as const` keeps its literal types ("response" stays a literal), Mutable
  // drops the readonly that adds, and passing it through a function makes it no longer a
  // fresh literal — so fields the SDK lacks are allowed while the rest is still checked.
  'type Mutable<T> = { -readonly [K in keyof T]: Mutable<T[K]> };',
  'const loose = <V>(value: V): Mutable<V> => value as Mutable<V>;',
  'const answer = <T>(value: T): T => value;',
];
let line = lines.length; // lines so far (0-based index of the next)
const spans = []; // [first line, last line] (0-based) per entry
entries.forEach((entry, i) => {
  const t = TYPES[entry.kind];
  if (!t) throw new Error(`entry ${i}: unknown kind ${entry.kind}`);
  const body = JSON.stringify(entry.body, null, 1);
  const text = t.literal
    ? `export const e${i}: ${t.type} = ${body};`
    : `export const e${i} = answer<${t.type}>(loose(${body} as const));`;
  const count = text.split('\n').length;
  spans.push([line, line + count - 1]);
  lines.push(text);
  line += count;
});

const work = join(here, '.work');
mkdirSync(work, { recursive: true });
const file = join(work, 'check.ts');
writeFileSync(file, lines.join('\n') + '\n');

const program = ts.createProgram([file], {
  strict: true,
  noEmit: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  // The SDK's own declarations are its business; ours are what is judged.
  skipLibCheck: true,
  types: [],
});
const results = entries.map(() => []);
const unplaced = [];
for (const d of ts.getPreEmitDiagnostics(program)) {
  const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
  if (!d.file || d.file.fileName !== file || d.start === undefined) {
    unplaced.push(message);
    continue;
  }
  const { line } = d.file.getLineAndCharacterOfPosition(d.start);
  const at = spans.findIndex(([a, b]) => line >= a && line <= b);
  if (at < 0) unplaced.push(`line ${line + 1}: ${message}`);
  else results[at].push(message);
}
writeFileSync(output, JSON.stringify({ results, unplaced, typescript: ts.version }));
