#!/usr/bin/env bash
# Installs what evflow needs, builds it, and runs the main job:
#   * the `evflow` command (Rust), run on the demo reconstruction workload
#     shipped in examples/configs/demo.toml;
#   * the `evflow` Python package, installed into .venv with its numba
#     kernels (pip install '.[kernels]').
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "evflow needs a Rust toolchain (cargo); install it with rustup: https://rustup.rs" >&2
    exit 1
fi
cargo build --release -p evflow-cli
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet '.[kernels]'
./target/release/evflow run examples/configs/demo.toml --report target/demo-report.json "$@"
echo "report written to target/demo-report.json"
echo "Python package installed in .venv: . .venv/bin/activate && ./target/release/evflow run examples/zmumu.py"
