# ObjDirect top-level entry points. Every target bootstraps first, so each works on a fresh Debian 12.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
LISTEN ?= 127.0.0.1:9000
DATA ?= ./var/data
ACCESS_KEY ?= objdirect
SECRET_KEY ?= objdirect-secret
CTEST_ARGS ?=

.PHONY: bootstrap build run test format clean

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

format:
	find src include tools tests bench python -name '*.cc' -o -name '*.hpp' -o -name '*.h' 2>/dev/null | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
