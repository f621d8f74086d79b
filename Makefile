# ObjDirect top-level entry points. Every target bootstraps first, so each works on a fresh Debian 12.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
LISTEN ?= 127.0.0.1:9000
DATA ?= ./var/data
ACCESS_KEY ?= objdirect
SECRET_KEY ?= objdirect-secret
CTEST_ARGS ?=

.PHONY: bootstrap build run test test-asan test-tsan fuzz format clean

bootstrap:
	@scripts/bootstrap

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: bootstrap $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@mkdir -p $(DATA)
	@echo "ObjDirect S3 endpoint: http://$(LISTEN)"
	@echo "  access key: $(ACCESS_KEY)   secret key: $(SECRET_KEY)   region: us-east-1"
	@echo "  try: AWS_ACCESS_KEY_ID=$(ACCESS_KEY) AWS_SECRET_ACCESS_KEY=$(SECRET_KEY) AWS_DEFAULT_REGION=us-east-1 aws --endpoint-url http://$(LISTEN) s3 mb s3://demo"
	$(BUILD_DIR)/bin/objdirect-server --listen $(LISTEN) --data $(DATA) --access-key $(ACCESS_KEY) --secret-key $(SECRET_KEY)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# ASan+UBSan and TSan builds of the whole suite, each in its own build folder.
test-asan: bootstrap
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOBJDIRECT_SANITIZE=address
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

test-tsan: bootstrap
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOBJDIRECT_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=second_deadlock_stack=1 ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# Every libFuzzer target for FUZZ_SECONDS each (default 30).
FUZZ_SECONDS ?= 30
fuzz: bootstrap
	scripts/fuzz.sh $(FUZZ_SECONDS)

format:
	find src include tools tests bench python -name '*.cc' -o -name '*.hpp' -o -name '*.h' 2>/dev/null | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
