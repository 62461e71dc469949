# ymtop — non-recursive build.
#
#   make            ymtop and libymagent.so
#   make deps       install missing Debian packages (root) or print the line
#   make check      deps, build, then every test; ends "N passed, N failed"
#   make demo       deps, build, run the demo program under the agent
#   make bench      benchmarks (not part of check)
#   make install    PREFIX=/usr/local DESTDIR=
#
#   SANITIZER=address|undefined|thread   builds ymtop and the tests with it
#   (the agent itself is never sanitized: a sanitizer runtime interposes
#   malloc too)

CC       ?= cc
OPT      ?= -O2 -g
WARN     ?= -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wformat=2 \
            -Wno-format-nonliteral
STD      := -std=c11 -D_GNU_SOURCE
PREFIX   ?= /usr/local
DESTDIR  ?=
# A sanitized build lives apart, so that flags never mix in one tree.
B        := build$(if $(SANITIZER),-$(SANITIZER))
VERSION  := 0.1.0

PKG_CONFIG ?= pkg-config
TUI_PKGS := ncursesw libdw zlib sqlite3 libbsd

ifneq ($(SANITIZER),)
SAN := -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

CPPFLAGS += -Iinclude -Ishm -MMD -MP -DYM_VERSION='"$(VERSION)"' -DYM_LIBDIR='"$(PREFIX)/lib/ymtop"'
BASE_CFLAGS := $(STD) $(OPT) $(WARN)

# ---- Debian packages ----
DEB_PKGS := gcc make pkg-config libncurses-dev libunwind-dev libdw-dev \
            libelf-dev libbsd-dev libiberty-dev zlib1g-dev libsqlite3-dev \
            libcmocka-dev tmux sqlite3 python3 procps golang-go

.PHONY: all deps check demo bench install clean unit integration tui-tests stress

all: $(B)/ymtop $(B)/libymagent.so

deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' \
	    || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "ymtop: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
	    || { echo "ymtop: apt-get install$$missing failed"; exit 1; }; \
	else \
	  echo "ymtop: missing packages; run: sudo apt-get install -y$$missing"; \
	  exit 1; \
	fi

# ---- The agent ----
AGENT_SRC := injector/hooks.c injector/agent.c injector/table.c \
             shm/layout.c shm/create.c
AGENT_OBJ := $(AGENT_SRC:%.c=$(B)/agent/%.o)
AGENT_CFLAGS := $(BASE_CFLAGS) -fPIC -fvisibility=hidden \
                -ftls-model=initial-exec -fno-plt -fno-strict-aliasing

$(B)/agent/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(AGENT_CFLAGS) -c $< -o $@

$(B)/libymagent.so: $(AGENT_OBJ)
	$(CC) -shared -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined -o $@ $^ \
	  -lunwind -lm -ldl -lpthread

# ---- ymtop ----
# ymtop also links the ptrace injector (injector/inject*.c); the agent's
# own sources are never linked into ymtop.
TUI_SRC := $(wildcard tui/*.c) $(wildcard injector/inject*.c) shm/layout.c shm/reader.c
TUI_OBJ := $(TUI_SRC:%.c=$(B)/tui/%.o)
TUI_CFLAGS := $(BASE_CFLAGS) $(SAN) $(shell $(PKG_CONFIG) --cflags $(TUI_PKGS) 2>/dev/null)
TUI_LIBS := $(shell $(PKG_CONFIG) --libs $(TUI_PKGS) 2>/dev/null) -lelf -liberty -lm

$(B)/tui/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TUI_CFLAGS) -c $< -o $@

$(B)/ymtop: $(TUI_OBJ)
	$(CC) $(SAN) -o $@ $^ $(TUI_LIBS)

# ---- Tests ----
# Programs run under the agent (never sanitized: they host the agent).
PROG_C   := $(wildcard tests/progs/*.c)
PROG_CXX := $(wildcard tests/progs/*.cc)
PROGS    := $(PROG_C:tests/progs/%.c=$(B)/progs/%) \
            $(PROG_CXX:tests/progs/%.cc=$(B)/progs/%)

$(B)/progs/%: tests/progs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g -fno-omit-frame-pointer -fno-inline $(WARN) -o $@ $< -lpthread -ldl

# Libraries the test programs load with dlopen.
PROG_LIBS := $(patsubst tests/progs/lib/%.c,$(B)/progs/lib%.so,$(wildcard tests/progs/lib/*.c))
PROGS     += $(PROG_LIBS)

$(B)/progs/lib%.so: tests/progs/lib/%.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O1 -g -fPIC -shared $(WARN) -o $@ $<

$(B)/progs/%: tests/progs/%.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Werror -o $@ $< -lpthread

# Unit tests: cmocka, white-box, built with the sanitizer when one is set.
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/unit/%)
# Each unit test lists the sources it links in tests/unit/<test>.deps.
$(B)/unit/%: tests/unit/%.c $(wildcard shm/*.[ch] tui/*.[ch] injector/*.[ch] include/ymtop/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TUI_CFLAGS) -Ishm -Itui -Iinjector -o $@ $< \
	  $(shell cat tests/unit/$*.deps 2>/dev/null) \
	  $(shell $(PKG_CONFIG) --libs cmocka) $(TUI_LIBS)

unit: $(UNIT_BIN)

check: deps
	@$(MAKE) --no-print-directory all $(PROGS) $(UNIT_BIN)
	@YM_BUILD=$(B) tests/run.sh

demo: deps
	@$(MAKE) --no-print-directory all $(B)/progs/demo
	@tests/demo.sh $(B)

bench: all
	@$(MAKE) --no-print-directory $(B)/bench/allocbench
	@tests/bench/run.sh $(B)

$(B)/bench/%: tests/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O2 -g $(WARN) -o $@ $< -lpthread

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/ymtop \
	  $(DESTDIR)$(PREFIX)/include/ymtop $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 755 $(B)/ymtop $(DESTDIR)$(PREFIX)/bin/ymtop
	install -m 644 $(B)/libymagent.so $(DESTDIR)$(PREFIX)/lib/ymtop/libymagent.so
	install -m 644 include/ymtop/*.h $(DESTDIR)$(PREFIX)/include/ymtop/
	install -m 644 man/ymtop.1 $(DESTDIR)$(PREFIX)/share/man/man1/ymtop.1
	install -m 644 man/ymagent.7 $(DESTDIR)$(PREFIX)/share/man/man7/ymagent.7

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
