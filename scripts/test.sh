#!/usr/bin/env bash
# Runs every check and test of evflow: formatting, lints, the Rust test
# suite (unit, integration, stress, doc examples) and the Python test suite
# (in a virtual environment, .venv, that this script creates or updates).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo clippy -D warnings, CUDA backend (builds without CUDA: the driver loads at run time)"
cargo clippy -p evflow-device -p evflow-cli --features evflow-device/cuda --all-targets --quiet -- -D warnings
echo "== cargo doc (broken or private links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --exclude evflow-python --no-deps --quiet
echo "== cargo test"
cargo test --release --quiet

echo "== Python package (pip install '.[test]' into .venv)"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet '.[test]'
echo "== ruff"
.venv/bin/ruff check python tests/python examples bench
.venv/bin/ruff format --check python tests/python examples bench
echo "== pytest"
.venv/bin/python -m pytest tests/python -q
