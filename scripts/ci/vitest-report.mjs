// Reads vitest's JSON report and prints, for .ci/run:
//   counts <report>            "<passed> <failed>" (a run with no test counts as one failure;
//                              a file that failed outside its tests counts too)
//   failures <report> <label>  one entry per failed test or file: "<label>: <file> > <test>: <message>"
//                              (the label names the run: "Node 22", "Bun")
import { readFileSync } from 'node:fs';

const [what, path, label] = process.argv.slice(2);
const report = JSON.parse(readFileSync(path, 'utf8'));

if (what === 'counts') {
  const failedFiles = report.numFailedTestSuites && !report.numFailedTests ? report.numFailedTestSuites : 0;
  const failed = report.numFailedTests + (report.numRuntimeErrorTestSuites ?? 0) + failedFiles;
  console.log(`${report.numPassedTests} ${report.numTotalTests === 0 ? 1 : failed}`);
} else if (what === 'failures') {
  // The message without its stack, up to 4,000 characters: a test that says what it found (the
  // database's rows, a failed property's seed and counterexample) is diagnosable from CI's output.
  const first = (text) =>
    (text || '')
      .split('\n')
      .filter((l) => l.trim() !== '' && !/^\s+at /.test(l))
      .join('\n    ')
      .slice(0, 4000);
  for (const file of report.testResults) {
    if (file.status === 'failed' && file.assertionResults.every((t) => t.status !== 'failed'))
      console.log(`${label}: ${file.name}: ${first(file.message || 'failed')}`);
    for (const t of file.assertionResults)
      if (t.status === 'failed') console.log(`${label}: ${file.name} > ${t.fullName}: ${first(t.failureMessages[0])}`);
  }
} else {
  console.error('usage: vitest-report.mjs counts <report> | failures <report> <label>');
  process.exit(2);
}
