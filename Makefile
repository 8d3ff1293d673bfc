# gpukmm — top-level build. Plain GNU make, incremental and -j safe.
#
# Conventions (no per-directory makefiles needed):
#   lib/*/*.c            -> $(BUILD)/lib/libgpukmm.a          (shared code, headers in include/gpukmm/)
#   proto/*.proto        -> $(BUILD)/gen/*.pb-c.{c,h}          (protoc-c, part of libgpukmm.a)
#   supervisor/*.c       -> $(BUILD)/bin/gpukmm                (main.c + the rest)
#   services/NAME/*.c    -> $(BUILD)/bin/gpukmm-NAME
#   tools/NAME/*.c       -> $(BUILD)/bin/NAME                  (gpukmmctl, kubesim, fake-kmm)
#   Every non-main .c of a program dir also goes into $(BUILD)/lib/libgpukmm-app.a so that
#   unit tests can call a service's pure decision code without its main().
#   tests/unit/*.c, tests/ipc/*.c -> Criterion test binaries  $(BUILD)/tests/{unit,ipc}/NAME
#   tests/bin/*.c        -> helper programs for tests           $(BUILD)/tests/bin/NAME
#   tests/bench/*.c      -> benchmark programs                  $(BUILD)/bench/NAME
#   tests/e2e/*.sh, tests/ipc/*.sh -> script tests (TAP-ish "ok"/"not ok" lines), run by tests/run.sh
#
# BUILD=dir selects the build directory (helpers working in parallel use their own);
# SAN=1 builds with ASan+UBSan (make check does a second pass in $(BUILD)-san).

BUILD   ?= build
SAN     ?= 0
PREFIX  ?= /usr/local
DESTDIR ?=

CC      ?= cc
CXX     ?= c++
PKGS    := libprotobuf-c libcurl libcjson libkmod libpci libmicrohttpd yaml-0.1 libpcre2-8 openssl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CRIT_CFLAGS := $(shell pkg-config --cflags criterion 2>/dev/null)
# libnng exports nanomsg's nn_* API too (its compat layer). Criterion talks to
# its workers over nanomsg, so in a test linked with -lnng its nn_* calls bound
# to libnng 1.5.2: a test that left an nng close hung (nng#1543) then hung the
# worker's own nn_close at exit, and Criterion's runner aborted on the timeout.
# libnanomsg named before libnng gives Criterion its own library back.
CRIT_LIBS   := $(shell pkg-config --libs criterion 2>/dev/null) -Wl,--no-as-needed -lnanomsg -Wl,--as-needed

OPT      ?= -O2
WARN     := -Wall -Wextra -Werror -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE -Iinclude -I$(BUILD)/gen $(PKG_CFLAGS)
# lib-internal headers are included as "<module>/x.h" by generated code only
GEN_CPPFLAGS := -Ilib
CFLAGS   ?= $(OPT) -g
CFLAGS   += -std=c17 $(WARN) -fno-strict-aliasing -MMD -MP
CXXFLAGS ?= $(OPT) -g
CXXFLAGS += -std=c++17 $(WARN) -MMD -MP
LDLIBS   += $(PKG_LIBS) -lnng -lre2 -lstdc++ -lpthread -lm
ifeq ($(SAN),1)
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
  CFLAGS   += $(SANFLAGS)
  CXXFLAGS += $(SANFLAGS)
  LDFLAGS  += $(SANFLAGS)
endif

# ---- sources ---------------------------------------------------------------
PROTOS     := $(sort $(wildcard proto/*.proto))
PROTO_C    := $(patsubst proto/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTOS))
PROTO_H    := $(PROTO_C:.c=.h)
LIB_SRCS   := $(sort $(wildcard lib/*/*.c))
LIB_CXX    := $(sort $(wildcard lib/*/*.cc))
PB_REGISTRY := $(BUILD)/gen/pb_registry.c
LIB_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(LIB_CXX:%.cc=$(BUILD)/obj/%.o) \
              $(PROTO_C:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o) $(BUILD)/obj/gen/pb_registry.o \
              $(BUILD)/obj/gen/version.o
LIBGK      := $(BUILD)/lib/libgpukmm.a

SVC_DIRS   := $(sort $(patsubst %/,%,$(dir $(wildcard services/*/main.c))))
TOOL_DIRS  := $(sort $(patsubst %/,%,$(dir $(wildcard tools/*/main.c))))
SUP_DIRS   := $(sort $(patsubst %/,%,$(dir $(wildcard supervisor/main.c))))
PROG_DIRS  := $(SUP_DIRS) $(SVC_DIRS) $(TOOL_DIRS)
APP_SRCS   := $(sort $(filter-out %/main.c,$(foreach d,$(PROG_DIRS),$(wildcard $(d)/*.c))))
APP_OBJS   := $(APP_SRCS:%.c=$(BUILD)/obj/%.o)
LIBAPP     := $(BUILD)/lib/libgpukmm-app.a

progname    = $(if $(filter supervisor,$(1)),gpukmm,$(if $(filter services/%,$(1)),gpukmm-$(notdir $(1)),$(notdir $(1))))
BINS       := $(foreach d,$(PROG_DIRS),$(BUILD)/bin/$(call progname,$(d)))

UNIT_SRCS  := $(sort $(wildcard tests/unit/*.c tests/ipc/*.c))
UNIT_BINS  := $(UNIT_SRCS:tests/%.c=$(BUILD)/tests/%)
TBIN_SRCS  := $(sort $(wildcard tests/bin/*.c))
TBINS      := $(TBIN_SRCS:tests/bin/%.c=$(BUILD)/tests/bin/%)
BENCH_SRCS := $(sort $(wildcard tests/bench/*.c))
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(BUILD)/bench/%)

.PHONY: all check check-run test bench fuzz demo chaos install deps clean tests proto image deploy-image
.DEFAULT_GOAL := all
.SECONDARY:

all: $(BINS)
tests: $(BINS) $(UNIT_BINS) $(TBINS)
proto: $(PROTO_H)

# ---- protobuf --------------------------------------------------------------
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto $(PROTOS)
	@mkdir -p $(BUILD)/gen
	protoc-c -Iproto --c_out=$(BUILD)/gen $<

# the table of every descriptor (lib/ipc's JSON<->protobuf registry)
$(PB_REGISTRY): $(PROTO_H) tools/gen-pb-registry.sh
	tools/gen-pb-registry.sh $(BUILD)/gen $@

# --version: `git describe` of this tree (tags, else the commit; -dirty for local
# changes), "unknown" when the tree is not a git checkout of its own (a tarball,
# even one unpacked inside another repository). Rewritten only when it changes,
# so a rebuild relinks nothing. VERSION=x overrides it (packagers).
GIT_TOP := $(shell git -C $(CURDIR) rev-parse --show-toplevel 2>/dev/null)
VERSION ?= $(if $(filter $(realpath $(CURDIR)),$(realpath $(GIT_TOP))),$(shell git -C $(CURDIR) describe --tags --always --dirty 2>/dev/null),)
VERSION_STR := $(if $(strip $(VERSION)),$(strip $(VERSION)),unknown)
.PHONY: FORCE
$(BUILD)/gen/version.c: FORCE
	@mkdir -p $(@D)
	@printf '/* generated by the Makefile */\nconst char gk_version[] = "%s";\n' '$(subst ','',$(subst ",,$(VERSION_STR)))' >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

# every object may include generated headers
$(BUILD)/obj/%.o: %.c | $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(BUILD)/obj/%.o: %.cc | $(PROTO_H)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c -o $@ $<
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c | $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(GEN_CPPFLAGS) $(filter-out -Werror,$(CFLAGS)) -c -o $@ $<

$(LIBGK): $(LIB_OBJS)
	@mkdir -p $(@D)
	@rm -f $@
	ar qcs $@ $^
# the app archive always has at least one member, even before any service exists
$(LIBAPP): $(APP_OBJS) $(BUILD)/obj/app-anchor.o
	@mkdir -p $(@D)
	@rm -f $@
	ar qcs $@ $^

$(BUILD)/obj/app-anchor.o:
	@mkdir -p $(@D)
	echo 'int gk_app_anchor;' | $(CC) -x c -c -o $@ -

# --as-needed: a program depends only on the libraries its objects use (what
# most toolchains do by default; the sanitizer build's does not): gpukmm-probe
# must start without the cluster client's libraries
define prog_rule
$(BUILD)/bin/$(call progname,$(1)): $(BUILD)/obj/$(1)/main.o $(LIBAPP) $(LIBGK)
	@mkdir -p $$(@D)
	$$(CC) $$(LDFLAGS) -Wl,--as-needed -o $$@ $$< -Wl,--start-group $(LIBAPP) $(LIBGK) -Wl,--end-group $$(LDLIBS)
endef
$(foreach d,$(PROG_DIRS),$(eval $(call prog_rule,$(d))))

# helper programs are plain programs, without Criterion: libcriterion exports a
# main() that takes over sanitizer builds run from a Criterion worker (BXFI_MAP set)
$(BUILD)/tests/bin/%: tests/bin/%.c $(LIBAPP) $(LIBGK) | $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -Wl,--start-group $(LIBAPP) $(LIBGK) -Wl,--end-group $(LDLIBS)

# kreq is the harness's HTTP client (every kraw), run thousands of times a pass: it
# links libssl and libcrypto only and is never sanitized (ASan's start and exit cost
# 60 ms a run, three times curl's whole run); tests/e2e/kreq.sh checks it against curl
$(BUILD)/tests/bin/kreq: tests/bin/kreq.c
	@mkdir -p $(@D)
	$(CC) $(OPT) -g -std=c17 $(WARN) -D_GNU_SOURCE -o $@ $< -lssl -lcrypto

$(BUILD)/tests/%: tests/%.c $(LIBAPP) $(LIBGK) | $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CRIT_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -Wl,--start-group $(LIBAPP) $(LIBGK) -Wl,--end-group $(CRIT_LIBS) $(LDLIBS)

$(BUILD)/bench/%: tests/bench/%.c $(LIBAPP) $(LIBGK) | $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -Wl,--start-group $(LIBAPP) $(LIBGK) -Wl,--end-group $(LDLIBS)

# ---- test / bench / fuzz -----------------------------------------------------
# make check: everything, then everything again under ASan+UBSan (tests/check.sh: the
# sanitizer build runs niced beside the plain pass's tests); T=pattern limits the tests.
# Builds with -j$(JOBS) (default 2: the machines are 2-core) so `make check` alone is enough.
JOBS ?= 2
check:
	BUILD=$(BUILD) JOBS=$(JOBS) MAKE="$(MAKE)" tests/check.sh $(T)

# one pass in one build dir; T=pattern limits the tests run (e.g. T=ipc)
check-run: tests
	BUILD=$(BUILD) SAN=$(SAN) tests/run.sh $(T)

test: check-run

bench: all $(BENCH_BINS) $(TBINS)
	BUILD=$(BUILD) tests/bench/run.sh $(B)

fuzz: all
	BUILD=$(BUILD) tests/fuzz/run.sh $(FUZZ_SECONDS)

demo: all $(TBINS)
	BUILD=$(BUILD) tools/demo.sh

chaos: tests
	BUILD=$(BUILD) CHAOS_LONG=1 tests/e2e/chaos.sh
	BUILD=$(BUILD) CHAOS_LONG=1 tests/e2e/chaos_guard.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	$(if $(wildcard systemd/*.service),install -d $(DESTDIR)$(PREFIX)/lib/systemd/system && \
	  install -m 0644 $(wildcard systemd/*.service) $(DESTDIR)$(PREFIX)/lib/systemd/system/)

# The container image, tagged with the version every binary's --version prints
# (the same VERSION_STR, passed into the build: a context without .git says it too).
# `make deploy-image IMAGE=registry.example.com/gpukmm` then points deploy/ at it
# (deploy/version: the image name and tag, the app.kubernetes.io/version labels).
IMAGE ?= gpukmm
CONTAINER_ENGINE ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null || echo podman)
image:
	$(CONTAINER_ENGINE) build -f Containerfile --build-arg VERSION=$(VERSION_STR) -t $(IMAGE):$(VERSION_STR) .
deploy-image:
	tools/set-image.sh $(IMAGE) $(VERSION_STR)

deps:
	@tools/deps.sh

clean:
	rm -rf build build-*

-include $(LIB_OBJS:.o=.d) $(APP_OBJS:.o=.d) $(foreach d,$(PROG_DIRS),$(BUILD)/obj/$(d)/main.d) \
         $(UNIT_BINS:=.d) $(BENCH_BINS:=.d)
