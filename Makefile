# murmur — one non-recursive Makefile.
#
# Sources are discovered per folder: every model/*.c, gossip/*.c, net/*.c,
# sim/*.c and agent/*.c (except agent/main.c) goes into one static library,
# $(BUILD)/libmurmur.a; build/murmur is agent/main.c linked against it.
# Every tests/test_*.c is one cmocka suite binary linked against the same
# library, so the agent, the simulator and the tests use the very same objects.
#
#   make                     build build/murmur
#   make test                install deps, build, run every suite
#   make SANITIZER=address test   (address+undefined), undefined, thread
#   make demo | bench | bench-peers | experiments | soak | fmt | fmt-check | lint | clean
#   make install PREFIX=/usr/local

CC        ?= cc
PREFIX    ?= /usr/local
SANITIZER ?=
BUILD     ?= build
ifneq ($(SANITIZER),)
BUILD     := build/san-$(SANITIZER)
endif

PKGS      := libsodium openblas zlib cmocka libpng
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN      := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
             -Wno-unused-parameter -Werror
OPT       ?= -O2 -g -march=x86-64-v2 -ftree-vectorize
CFLAGS    := -std=c11 -D_DEFAULT_SOURCE $(OPT) $(WARN) -I. $(PKG_CFLAGS) -MMD -MP
LDLIBS    := $(PKG_LIBS) -lnng -lpthread -lm

ifeq ($(SANITIZER),address)
SANFLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(SANITIZER),undefined)
SANFLAGS  := -fsanitize=undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else ifeq ($(SANITIZER),thread)
SANFLAGS  := -fsanitize=thread -fno-omit-frame-pointer
else ifneq ($(SANITIZER),)
$(error SANITIZER must be address, undefined or thread, not '$(SANITIZER)')
endif
CFLAGS    += $(SANFLAGS) $(EXTRA_CFLAGS)

# The commit murmur is built from (`murmur --version`, murmur_build_info):
# $(BUILD)/gen/commit.h is rewritten only when it changes, so only
# agent/version.o is rebuilt.
GIT_COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(shell mkdir -p $(BUILD)/gen && echo '#define MURMUR_COMMIT "$(GIT_COMMIT)"' >$(BUILD)/gen/commit.h.new && \
  { cmp -s $(BUILD)/gen/commit.h.new $(BUILD)/gen/commit.h || cp $(BUILD)/gen/commit.h.new $(BUILD)/gen/commit.h; } ; \
  rm -f $(BUILD)/gen/commit.h.new)
CFLAGS    += -I$(BUILD)/gen
LDFLAGS   += $(SANFLAGS)

LIB_SRCS  := $(wildcard common/*.c model/*.c gossip/*.c net/*.c sim/*.c) \
             $(filter-out agent/main.c,$(wildcard agent/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
BENCH_SRCS := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
LIB       := $(BUILD)/libmurmur.a
BIN       := $(BUILD)/murmur
C_FILES   := $(shell git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build/*')

.SECONDARY:

.PHONY: all deps test unit demo bench bench-peers experiments soak fmt fmt-check lint clean install help

all: $(BIN)

help:
	@sed -n '2,16p' Makefile | sed 's/^# \{0,1\}//'

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(BUILD)/agent/main.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/tests/harness.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/tests/harness.o $(LIB) $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

deps:
	@sh scripts/deps.sh

# `make test` builds everything and runs every suite; SUITES=name1,name2 runs
# a subset. The runner prints one closing line, "N passed, N failed".
test: deps
	@$(MAKE) --no-print-directory $(BIN) $(TEST_BINS)
	@sh tests/run.sh $(BUILD) $(SUITES)

unit: $(BIN) $(TEST_BINS)
	@sh tests/run.sh $(BUILD) $(SUITES)

demo: deps
	@$(MAKE) --no-print-directory $(BIN)
	@sh scripts/demo.sh $(BUILD)

bench: deps
	@$(MAKE) --no-print-directory $(BIN) $(BENCH_BINS)
	@sh bench/run.sh $(BUILD)

# `make bench-peers`: murmur side by side with its peers (PyTorch DDP, Gloo,
# Open MPI), interleaved, ratios as medians: every bench/peers/*.sh script.
# Installs the peers' Debian packages first (scripts/deps.sh peers).
bench-peers: deps
	@sh scripts/deps.sh peers
	@$(MAKE) --no-print-directory $(BIN) $(BENCH_BINS)
	@sh bench/peers/run.sh $(BUILD)

experiments: deps
	@$(MAKE) --no-print-directory $(BIN)
	@sh sim/experiments/run.sh $(BUILD)

soak: deps
	@$(MAKE) --no-print-directory $(BIN)
	$(BIN) sim --soak $${SOAK_SEEDS:-2000}

fmt:
	clang-format -i $(C_FILES)

fmt-check:
	@clang-format --dry-run -Werror $(C_FILES) && echo "fmt-check: ok"

lint:
	@sh scripts/lint.sh

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/murmur

clean:
	rm -rf build

-include $(LIB_OBJS:.o=.d) $(BUILD)/agent/main.d $(TEST_BINS:=.d) $(BENCH_BINS:=.d)

# Fuzzing (docs/FUZZING.md). Every tests/fuzz/fuzz_*.c is a libFuzzer target
# built with clang -fsanitize=fuzzer,address,undefined against the whole
# library, compiled a second time by clang into build/fuzz/ (independent of
# SANITIZER). Seed corpora are committed in tests/fuzz/corpus/NAME/.
#   make fuzz FUZZ_S=600          every target for FUZZ_S seconds (default 60)
#   make fuzz FUZZ_TARGETS=fuzz_csv,fuzz_idx FUZZ_S=60   a subset
#   make fuzz-build               build the targets only
#   make fuzz-seeds               regenerate the generated seeds (review the diff)
# `make test` runs every target for a few seconds (tests/integration/fuzz_smoke.sh).
# Without clang and libFuzzer (apt-get install clang libclang-rt-14-dev) the
# targets say "skipped".
FUZZ_CC      ?= clang
FUZZ_S       ?= 60
FUZZ_TARGETS ?=
FUZZ_BUILD   := build/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  := -std=c11 -D_DEFAULT_SOURCE -O1 -g -I. -fno-omit-frame-pointer $(PKG_CFLAGS) -MMD -MP
FUZZ_OBJS    := $(LIB_SRCS:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_LIB     := $(FUZZ_BUILD)/libmurmur.a
FUZZ_BINS    := $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_BUILD)/%)

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_LIB): $(FUZZ_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer $< $(FUZZ_LIB) -o $@ $(LDLIBS)

$(BUILD)/tests/fuzz/mkseeds: $(BUILD)/tests/fuzz/mkseeds.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

.PHONY: fuzz fuzz-build fuzz-seeds
fuzz-build:
	@if ! sh tests/fuzz/have_libfuzzer.sh $(FUZZ_CC); then \
	    echo "fuzz: $(FUZZ_CC) with libFuzzer not found (apt-get install clang libclang-rt-14-dev); skipped"; \
	else $(MAKE) --no-print-directory $(FUZZ_BINS) $(BUILD)/tests/fuzz/mkseeds; fi

fuzz:
	@if ! sh tests/fuzz/have_libfuzzer.sh $(FUZZ_CC); then \
	    echo "fuzz: $(FUZZ_CC) with libFuzzer not found (apt-get install clang libclang-rt-14-dev); skipped"; \
	else $(MAKE) --no-print-directory $(FUZZ_BINS) && \
	    sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_S) $(FUZZ_BUILD)/corpus $(FUZZ_TARGETS); fi

fuzz-seeds: $(BUILD)/tests/fuzz/mkseeds
	$(BUILD)/tests/fuzz/mkseeds tests/fuzz/corpus tests/vectors

-include $(FUZZ_OBJS:.o=.d) $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_BUILD)/tests/fuzz/%.d) $(BUILD)/tests/fuzz/mkseeds.d
