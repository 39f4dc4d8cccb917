#!/usr/bin/env bash
# Runs every check and test of evflow: formatting, lints, the Rust test
# suite (unit, integration, doc examples) and the Python test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace --release
