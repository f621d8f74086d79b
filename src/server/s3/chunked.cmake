# objdirect_chunked: the aws-chunked body decoder (SigV4 streaming uploads). Included from
# src/server/CMakeLists.txt; paths are relative to this file so the includer's directory does not
# matter.
set(OBJDIRECT_CHUNKED_DIR ${CMAKE_CURRENT_LIST_DIR})

add_library(objdirect_chunked STATIC ${OBJDIRECT_CHUNKED_DIR}/chunked.cc)
target_link_libraries(objdirect_chunked PUBLIC objdirect_auth objdirect_common)

objdirect_test(s3_chunked_test
               SOURCES ${OBJDIRECT_CHUNKED_DIR}/chunked_test.cc ${OBJDIRECT_CHUNKED_DIR}/chunked_fuzz.cc
               LIBS objdirect_chunked LABELS s3)

# libFuzzer target: built with clang++-14 whatever the project compiler is.
# Run: build/bin/chunked_fuzz -max_total_time=60
option(OBJDIRECT_FUZZ "Build libFuzzer targets with clang++-14" OFF)
if(OBJDIRECT_FUZZ)
  find_program(OBJDIRECT_CLANGXX NAMES clang++-14 clang++ REQUIRED)
  set(chunked_fuzz_sources
      ${OBJDIRECT_CHUNKED_DIR}/chunked_fuzz.cc ${OBJDIRECT_CHUNKED_DIR}/chunked.cc
      ${PROJECT_SOURCE_DIR}/src/auth/sigv4.cc ${PROJECT_SOURCE_DIR}/src/auth/sigv2.cc
      ${PROJECT_SOURCE_DIR}/src/common/checksum.cc
      ${PROJECT_SOURCE_DIR}/src/common/uri.cc ${PROJECT_SOURCE_DIR}/src/common/time.cc
      ${PROJECT_SOURCE_DIR}/src/common/status.cc)
  set(chunked_fuzz_out ${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/chunked_fuzz)
  add_custom_command(
    OUTPUT ${chunked_fuzz_out}
    COMMAND ${OBJDIRECT_CLANGXX} -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined
            -DOBJDIRECT_FUZZ_MAIN -I${PROJECT_SOURCE_DIR}/src -I${PROJECT_SOURCE_DIR}/include
            ${chunked_fuzz_sources} -lcrypto -lisal -o ${chunked_fuzz_out}
    DEPENDS ${chunked_fuzz_sources} ${OBJDIRECT_CHUNKED_DIR}/chunked.hpp
            ${OBJDIRECT_CHUNKED_DIR}/chunked_fuzz.hpp
    COMMENT "Building libFuzzer target chunked_fuzz with ${OBJDIRECT_CLANGXX}"
    VERBATIM)
  add_custom_target(chunked_fuzz ALL DEPENDS ${chunked_fuzz_out})
endif()
