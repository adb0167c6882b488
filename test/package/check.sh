#!/usr/bin/env bash
# Packs taskheap as npm would publish it and installs the tarball into fresh
# consumer projects in a temp dir (never this repo's node_modules): ESM,
# CommonJS, and TypeScript with `module: nodenext` (an ESM and a CommonJS
# package) and with `moduleResolution: bundler`, each type-checked with skipLibCheck false and
# true, by TypeScript 5 and 7. Each runs a small smoke script. A misspelt option must be
# reported against the form it was written in, on both compilers. Then publint and attw check the
# package's metadata and types, and the tarball's .d.ts files are checked for
# internal members. Exits non-zero on the first failure.
#
# The TypeScript consumers see only what they installed: taskheap, its
# dependencies and @types/node (this repo's version), never this repo's
# @types. In particular no @types/luxon and no @types/pg: taskheap's .d.ts
# files (taskheap/postgres among them) must type-check without them.
#
#   bash test/package/check.sh     (or: npm run check:package)
#
# TASKHEAP_EXTRA_NODES: bin directories of further Node versions (space
# separated; .ci/run passes 22 and 24) that run every smoke script too.
# TASKHEAP_RUNTIMES: paths of a Bun and a Deno binary (.ci/run passes those
# of scripts/ci/install-runtime.sh) that run them too (`deno run -A`).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
fixtures="$repo/test/package"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

cd "$repo"
# prepack builds dist/ first.
tarball="$work/$(npm pack --silent --pack-destination "$work" | tail -n 1)"
echo "packed $(basename "$tarball") ($(du -k "$tarball" | cut -f1) kB)"

npx --no-install publint run --strict "$tarball"
# The package is ESM only; `require()` loads that build on Node >= 20.19, so
# attw's node16 CJS "resolves to ESM" notice is expected, not an error.
# --profile node16: `moduleResolution: node10` ignores "exports", so it cannot
# see subpaths like taskheap/sqlite; TypeScript deprecates it.
npx --no-install attw "$tarball" --profile node16 --ignore-rules cjs-resolves-to-esm --format table-flipped

# The published types leave out everything marked @internal (stripInternal in
# tsconfig.build.json): test/declarations.test.ts checks every entry point's
# exports; this checks the tarball itself, for the members users would meet first.
mkdir -p "$work/unpacked" && tar -xzf "$tarball" -C "$work/unpacked"
node -e '
  const fs = require("fs");
  const dist = process.argv[1];
  const problems = [];
  const read = (file) => fs.readFileSync(`${dist}/${file}`, "utf8");
  const absent = (file, ...patterns) => { for (const p of patterns) if (p.test(read(file))) problems.push(`${file} shows ${p}`); };
  const present = (file, ...patterns) => { for (const p of patterns) if (!p.test(read(file))) problems.push(`${file} lacks ${p}`); };
  absent("core/task.d.ts", /^\s+_\w+/m);
  absent("scheduler.d.ts", /^\s+now\(\)/m, /^\s+createJob\(/m, /^\s+createStoredJob\(/m, /^\s+waitingByName\(/m);
  present("core/task.d.ts", /^\s+cancel\(/m);
  present("scheduler.d.ts", /^\s+schedule<R>\(/m, /^\s+waitingTasks\(/m);
  absent("scheduler.d.ts", /^\s+pendingTasks\(/m, /^\s+maxPending\b/m);
  if (problems.length > 0) { console.error("published types:", problems); process.exit(1); }
  console.log("published types: no internal member of Task or Scheduler");
' "$work/unpacked/package/dist"

# The README and the pages it links to are read from node_modules and on the
# registry's page: every relative link in a shipped page must reach a file
# that ships too (docs/, examples/, CONTRIBUTING.md), none only a clone has.
node -e '
  const fs = require("fs");
  const path = require("path");
  const root = process.argv[1];
  const pages = ["README.md", "CHANGELOG.md", "CONTRIBUTING.md", ...fs.readdirSync(`${root}/docs`).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
  const broken = [];
  for (const page of pages) {
    const text = fs.readFileSync(`${root}/${page}`, "utf8").replace(/```[\s\S]*?```/g, "");
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target) || target.startsWith("#")) continue;
      const file = path.join(path.dirname(`${root}/${page}`), decodeURI(target.split("#")[0]));
      if (!fs.existsSync(file)) broken.push(`${page}: ${target}`);
    }
  }
  if (broken.length > 0) { console.error("links to files the package does not ship:", broken); process.exit(1); }
  console.log(`shipped pages: ${pages.length}, every relative link reaches a shipped file`);
' "$work/unpacked/package"

consumer() { # name, package.json type, further packages to install
  local dir="$work/$1"
  mkdir -p "$dir"
  cp -r "$fixtures/$1/." "$dir/"
  printf '{ "name": "consumer-%s", "private": true, "type": "%s" }\n' "$1" "$2" > "$dir/package.json"
  (cd "$dir" && npm install --silent --prefer-offline "$tarball" "${@:3}")
  # Neither @types/luxon nor @types/pg may be needed: fail if something installed them.
  local types
  for types in luxon pg; do
    if [ -e "$dir/node_modules/@types/$types" ]; then echo "$1: @types/$types got installed"; exit 1; fi
  done
}

nodes=("$(command -v node)")
for bin in ${TASKHEAP_EXTRA_NODES:-}; do nodes+=("$bin/node"); done
for binary in ${TASKHEAP_RUNTIMES:-}; do nodes+=("$binary"); done
each_node() { # script, args...: runs it with every node (and Bun and Deno) in $nodes
  local node
  for node in "${nodes[@]}"; do
    case "$(basename "$node")" in
      bun) printf 'Bun %s: ' "$("$node" --version)" && "$node" "$@" ;;
      deno) printf 'Deno %s: ' "$("$node" --version | head -n 1 | cut -d ' ' -f 2)" && "$node" run -A "$@" ;;
      *) printf '%s: ' "$("$node" --version)" && "$node" "$@" ;;
    esac
  done
}

consumer esm module
(cd "$work/esm" && each_node smoke.mjs)
# The `bin` entry, as `npx taskheap` runs it from the installed tarball: usage
# (exit 0), a usage error (exit 2), and an error naming what to run (exit 1).
(
  cd "$work/esm"
  ./node_modules/.bin/taskheap --help | head -n 1 | grep -q '^Usage: taskheap <command>'
  set +e
  ./node_modules/.bin/taskheap frobnicate 2>/dev/null; usage=$?
  ./node_modules/.bin/taskheap tasks --sqlite missing.db 2>"$work/bin.err"; missing=$?
  set -e
  [ "$usage" = 2 ] || { echo "bin: a usage error exited $usage, not 2"; exit 1; }
  [ "$missing" = 1 ] && grep -q 'taskheap migrate --sqlite missing.db' "$work/bin.err" || { echo "bin: a missing database exited $missing"; cat "$work/bin.err"; exit 1; }
  echo "bin: taskheap runs from the tarball"
)

consumer cjs commonjs
(cd "$work/cjs" && each_node smoke.cjs)

# Both TypeScript compilers consumers use: 5.x and 7.x (the `typescript7` alias).
compilers=("$repo/node_modules/typescript/bin/tsc" "$repo/node_modules/typescript7/bin/tsc")
# Node's types as a real consumer has them: installed in the project (the
# version this repo uses), not borrowed from this repo through --typeRoots,
# which would also lend it every other @types package here (@types/pg...).
types_node="@types/node@$(node -p "require('$repo/node_modules/@types/node/package.json').version")"
for entry in ts-nodenext:module ts-bundler:module ts-cjs:commonjs; do
  name="${entry%%:*}"
  consumer "$name" "${entry#*:}" "$types_node"
  for tsc in "${compilers[@]}"; do
    echo "$name: TypeScript $(node "$tsc" --version)"
    (cd "$work/$name" && node "$tsc" -p . \
      && node "$tsc" -p . --skipLibCheck true --noEmit \
      && each_node out/smoke.js "$name")
  done
done

# A misspelt option is reported against the form it was written for, on both
# compilers: TypeScript 7 reports a call that matches no overload against the
# last overload only (5.x lists them all), so the function form comes last.
cp "$fixtures/misspelt-options.ts" "$work/ts-nodenext/"
echo '{ "extends": "./tsconfig.json", "compilerOptions": { "noEmit": true }, "files": ["misspelt-options.ts"] }' \
  > "$work/ts-nodenext/tsconfig.misspelt.json"
for tsc in "${compilers[@]}"; do
  out="$(cd "$work/ts-nodenext" && node "$tsc" -p tsconfig.misspelt.json)" && {
    echo "misspelt options compiled on TypeScript $(node "$tsc" --version)"
    exit 1
  }
  for expected in "'timout' does not exist in type 'TaskOptions'" "'timout' does not exist in type 'JobOptions'" \
    "Type '\"skp\"' is not assignable to type 'OverlapPolicy | undefined'"; do
    if ! grep -qF "$expected" <<<"$out"; then
      echo "TypeScript $(node "$tsc" --version) does not say: $expected"
      echo "$out"
      exit 1
    fi
  done
  echo "misspelt options: TypeScript $(node "$tsc" --version) names each against the function form"
done
echo "package: all consumers passed"
