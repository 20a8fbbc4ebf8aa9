#!/usr/bin/env bash
# VS Code extension (editors/vscode): install its node dependencies from the
# lockfile, type-check and bundle it, run the unit tests (vscode mocked) and
# the activation test (the bundle with vscode-languageclient under the mock,
# against a scripted peer), the client-server test against the real server ($MKEVOLVE_BIN, else
# build/mkevolve), package the .vsix and check the packaged manifest.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ext="$root/editors/vscode"
cd "$ext"

command -v node >/dev/null || { echo "50-vscode: node is not installed (Node 20+ needed)"; exit 1; }
command -v npm >/dev/null || { echo "50-vscode: npm is not installed"; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then echo "50-vscode: Node $(node --version) is too old (20+ needed)"; exit 1; fi

export MKEVOLVE_BIN=${MKEVOLVE_BIN:-$root/build/mkevolve}

npm ci --no-audit --no-fund --loglevel=error
npm run --silent typecheck
npm run --silent build
npm run --silent compile-tests
node --require ./out/test/mock/register.js --test --test-reporter=spec out/test/unit/ out/test/activation/
node --test --test-reporter=spec out/test/e2e/

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npx --no-install vsce package --no-dependencies --skip-license --allow-missing-repository -o "$tmp/mkevolve.vsix" >/dev/null
python3 - "$tmp/mkevolve.vsix" <<'PY'
"""Checks the packaged manifest: what VS Code reads when it installs it."""
import json
import re
import sys
import zipfile

vsix = zipfile.ZipFile(sys.argv[1])
names = set(vsix.namelist())
errors = []


def check(cond, what):
    if not cond:
        errors.append(what)


pkg = json.loads(vsix.read("extension/package.json"))
check("extension.vsixmanifest" in names, "extension.vsixmanifest present")
check("extension/readme.md" in {n.lower() for n in names}, "README.md packaged")
main = pkg.get("main", "").lstrip("./")
check(f"extension/{main}" in names, f"main entry {pkg.get('main')} packaged")
check(not any("/node_modules/" in n or n.startswith("extension/src/") or n.startswith("extension/test/")
              for n in names), "no sources, tests or node_modules in the package")

check("onLanguage:python" in pkg.get("activationEvents", []), "activationEvents has onLanguage:python")

engine = pkg.get("engines", {}).get("vscode", "")
m = re.fullmatch(r"[\^>=~]*\s*(\d+)\.(\d+)\.(\d+)", engine)
check(m is not None and (int(m.group(1)), int(m.group(2))) >= (1, 82), f"engines.vscode >= 1.82 (got {engine!r})")

contributes = pkg.get("contributes", {})
commands = {c["command"] for c in contributes.get("commands", [])}
for c in ["mkevolve.decompose", "mkevolve.evolve", "mkevolve.evolveAll", "mkevolve.swap",
          "mkevolve.restore", "mkevolve.openReport", "mkevolve.setApiKey", "mkevolve.clearApiKey",
          "mkevolve.restartServer", "mkevolve.showOutput", "mkevolve.showJobs"]:
    check(c in commands, f"command {c} contributed")

props = contributes.get("configuration", {}).get("properties", {})
for k in ["serverPath", "pythonPath", "backend", "proposer", "llm.provider", "llm.model", "llm.baseUrl",
          "llm.apiKeyEnv", "budget.proposals", "budget.tokens", "budget.seconds", "tolerance.atol",
          "tolerance.rtol", "server.maxRestarts", "trace.server"]:
    check(f"mkevolve.{k}" in props, f"setting mkevolve.{k} contributed")
check(not any("apikey" == k.lower().rsplit(".", 1)[-1] for k in props), "no setting holds an API key")

manifest = vsix.read("extension.vsixmanifest").decode()
check('Id="Microsoft.VisualStudio.Code.Engine"' in manifest and engine in manifest,
      "vsixmanifest records the engine")

if errors:
    print("50-vscode: packaged manifest problems:\n  " + "\n  ".join(errors))
    sys.exit(1)
print(f"50-vscode: {sys.argv[1].rsplit('/', 1)[-1]} OK ({len(names)} files, {len(commands)} commands, "
      f"{len(props)} settings, engines.vscode {engine})")
PY
