# ple4patch: `make` (= `make demo`), `make try`, `make test`, `make pin`.
# Every target does its own set-up on a fresh machine: the venvs below are created
# and filled on first use (torch 2.13.0 is the CPU build that lies on local disk).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ple4patch-installed
# A second venv with the newest Triton: the kernel must compile there too.
TL_VENV ?= .venv-triton-latest
TL_TRITON ?= 3.9.0
TL_PY := $(TL_VENV)/bin/python
TL_STAMP := $(TL_VENV)/.ple4patch-installed-triton-$(TL_TRITON)
PYTEST_ARGS ?=

.DEFAULT_GOAL := demo
.PHONY: demo try test test-main test-triton-latest test-sigint-ignored pin venv clean bench bench-gather bench-tiers bench-load bench-tool

# Set-up says what it does, a line per step, and shows pip's own output and progress: the
# first `make` takes a minute or two and is never silent. A step's line and its continuation
# lines (MORE, indented) stay within 100 columns, as ple4patch's own text does.
STEP = @printf '\n==> %s\n' 
MORE = @printf '    %s\n' 
PIP_INSTALL = -m pip install --progress-bar on

$(PY):
	$(STEP)"set-up 1/4: a virtual environment for ple4patch and its tests: $(VENV) ($(PYTHON) -m venv)"
	$(PYTHON) -m venv $(VENV)

$(STAMP): setup.cfg pyproject.toml | $(PY)
	$(STEP)"set-up 2/4: torch 2.13.0 into $(VENV), the CPU build (the largest step)"
	$(MORE)"after 'Installing collected packages' pip unpacks torch: about a minute without output"
	$(PY) $(PIP_INSTALL) torch==2.13.0
	$(STEP)"set-up 3/4: triton 3.6.0 into $(VENV), the engine's Triton"
	$(MORE)"(the kernel tests run under its interpreter)"
	$(PY) $(PIP_INSTALL) triton==3.6.0
	$(STEP)"set-up 4/4: ple4patch itself into $(VENV), editable, with its kernels and test extras"
	$(PY) $(PIP_INSTALL) -e '.[kernels,test]'
	touch $@
	$(STEP)"set-up done: $(VENV) (later runs skip it)"

venv: $(STAMP)

$(TL_PY):
	$(STEP)"set-up 1/3: a second virtual environment for the newest Triton: $(TL_VENV)"
	$(PYTHON) -m venv $(TL_VENV)

$(TL_STAMP): | $(TL_PY)
	$(STEP)"set-up 2/3: torch 2.13.0 into $(TL_VENV)"
	$(TL_PY) $(PIP_INSTALL) torch==2.13.0
	$(STEP)"set-up 3/3: triton $(TL_TRITON), pytest and numpy into $(TL_VENV)"
	$(TL_PY) $(PIP_INSTALL) triton==$(TL_TRITON) pytest numpy
	touch $@

## demo: build the stand-in engine wheel, install it in a throw-away venv,
##       dry-run -> apply -> status -> verify -> revert
demo: $(STAMP)
	$(PY) tools/demo.py

## try: a stand-in engine venv that stays ($(TRY_DIR)/engine) and a small checkpoint
##      ($(TRY_DIR)/checkpoint), then the commands to paste to run ple4patch on them by hand
TRY_DIR ?= .try
try: $(STAMP)
	$(STEP)"try: a stand-in engine to run ple4patch on by hand, in $(TRY_DIR) (kept)"
	$(PY) tools/try_engine.py $(TRY_DIR)

## test: the whole suite (the engine's Triton 3.6), then the kernel compile
##       tests under the newest Triton. pytest's exit 5 (no tests) fails make; the
##       newest-Triton run also fails when its Python imports another Triton than
##       $(TL_TRITON), or when no test passed (all skipped): tests/run_guards.py.
test: test-main test-triton-latest

test-main: $(STAMP)
	$(PY) -m pytest -q -ra $(PYTEST_ARGS)

test-triton-latest: $(TL_STAMP)
	PLE4PATCH_EXPECT_TRITON=$(TL_TRITON) PLE4PATCH_TESTS_MUST_RUN=1 \
	  $(TL_PY) -m pytest -q -ra -p no:cacheprovider tests/test_nvfp4_compile.py

## test-sigint-ignored: the Ctrl-C tests once more, launched with SIGINT ignored (as under
##       nohup, or `make test &` from a script): they must pass however the suite is started.
##       The run stops unless pytest really ignores SIGINT, and fails if no test passed.
test-sigint-ignored: $(STAMP)
	trap '' INT; PLE4PATCH_EXPECT_SIGINT_IGNORED=1 PLE4PATCH_TESTS_MUST_RUN=1 \
	  $(PY) -m pytest -q -ra -p no:cacheprovider -k 'ctrl_c or sigint' \
	  tests/test_launch.py tests/reliability

## pin: re-pin the manifests from the transform's output (after changing the injected code)
pin: $(STAMP)
	$(PY) tools/pin_manifest.py

## bench: the GPU benchmarks (thin setups over benchmarks/harness.py), each writing bench-out/:
##        bench-gather (FP8 stock design vs NVFP4 vs raw 90 B copy), bench-tiers (a table split
##        between VRAM and pinned host: one launch vs two), bench-load (one real-size TP4 share
##        from safetensors: wall time, peak RssAnon, pinned bytes, against torch's pinned
##        allocator, the stock FP8 allocation and a plain read). BENCH_PY is a Python with CUDA
##        torch + Triton (the engine's venv, say).
BENCH_PY ?= $(PYTHON)
BENCH_ARGS ?=
bench: bench-gather bench-tiers bench-load

bench-gather:
	$(BENCH_PY) benchmarks/bench_gather.py --out bench-out $(BENCH_ARGS)

bench-tiers:
	$(BENCH_PY) benchmarks/bench_tiers.py --out bench-out $(BENCH_ARGS)

bench-load:
	$(BENCH_PY) benchmarks/bench_load.py --out bench-out $(BENCH_ARGS)

## bench-tool: whole-process latency (no GPU): `ple4patch status` against `python -m pip show
##             1cat-vllm`, and `ple4patch apply`, on a wheel of the largest real engine file
##             in ../shared/engines (skips if absent); writes bench-out/tool/
BENCH_TOOL_ARGS ?=
bench-tool: $(STAMP)
	$(PY) benchmarks/bench_tool.py --out bench-out/tool $(BENCH_TOOL_ARGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache
