// Validates AsyncAPI documents with the AsyncAPI project's own parser (@asyncapi/parser): every
// error it reports fails the run; warnings and notes are printed. ci/asyncapi.sh runs it:
//
//   ASYNCAPI_PARSER_DIR=DIR node validate.mjs FILE…
//
// DIR is where npm installed the parser (npm install --prefix DIR @asyncapi/parser).
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const parserDir = process.env.ASYNCAPI_PARSER_DIR;
if (!parserDir) {
  console.error('validate.mjs: set ASYNCAPI_PARSER_DIR to where @asyncapi/parser is installed');
  process.exit(2);
}
const require = createRequire(join(parserDir, 'package.json'));
const { Parser, DiagnosticSeverity } = require('@asyncapi/parser');

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('validate.mjs: name the documents to validate');
  process.exit(2);
}
const parser = new Parser();
let failed = 0;
for (const file of files) {
  const { document, diagnostics } = await parser.parse(await readFile(file, 'utf8'), { source: file });
  const errors = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error);
  for (const d of diagnostics) {
    const level = d.severity === DiagnosticSeverity.Error ? 'error' : d.severity === DiagnosticSeverity.Warning ? 'warning' : 'note';
    console.log(`${file}: ${level}: ${d.code}: ${d.message} at ${d.path.join('/')}`);
  }
  if (document === undefined || errors.length > 0) {
    failed++;
    console.log(`${file}: INVALID (${errors.length} errors)`);
  } else {
    console.log(`${file}: valid AsyncAPI ${document.version()} (${document.channels().length} channels, ${document.operations().length} operations)`);
  }
}
process.exit(failed === 0 ? 0 : 1);
