# objdirect_s3util: S3 request-parsing and XML building blocks (names, range, conditional, xml).
# Included from src/server/CMakeLists.txt; paths are relative to this file so the includer's
# directory does not matter.
set(OBJDIRECT_S3UTIL_DIR ${CMAKE_CURRENT_LIST_DIR})
set(OBJDIRECT_S3UTIL_SOURCES
    ${OBJDIRECT_S3UTIL_DIR}/names.cc
    ${OBJDIRECT_S3UTIL_DIR}/range.cc
    ${OBJDIRECT_S3UTIL_DIR}/conditional.cc
    ${OBJDIRECT_S3UTIL_DIR}/xml.cc
    ${OBJDIRECT_S3UTIL_DIR}/tagging.cc
    ${OBJDIRECT_S3UTIL_DIR}/cors.cc
    ${OBJDIRECT_S3UTIL_DIR}/policy.cc)

add_library(objdirect_s3util STATIC ${OBJDIRECT_S3UTIL_SOURCES})
target_link_libraries(objdirect_s3util PUBLIC objdirect_common pugixml::pugixml Boost::json)

# Each test also replays its fuzz target's invariants (the *_fuzz_one functions) over
# deterministic mutations, so the ordinary GCC build exercises the fuzz code too.
objdirect_test(s3_names_test SOURCES ${OBJDIRECT_S3UTIL_DIR}/names_test.cc LIBS objdirect_s3util)
objdirect_test(s3_range_test
  SOURCES ${OBJDIRECT_S3UTIL_DIR}/range_test.cc ${OBJDIRECT_S3UTIL_DIR}/range_fuzz.cc
  LIBS objdirect_s3util)
objdirect_test(s3_conditional_test
  SOURCES ${OBJDIRECT_S3UTIL_DIR}/conditional_test.cc ${OBJDIRECT_S3UTIL_DIR}/conditional_fuzz.cc
  LIBS objdirect_s3util)
objdirect_test(s3_xml_test
  SOURCES ${OBJDIRECT_S3UTIL_DIR}/xml_test.cc ${OBJDIRECT_S3UTIL_DIR}/xml_fuzz.cc
  LIBS objdirect_s3util)
objdirect_test(s3_cors_test
  SOURCES ${OBJDIRECT_S3UTIL_DIR}/cors_test.cc ${OBJDIRECT_S3UTIL_DIR}/cors_fuzz.cc
  LIBS objdirect_s3util)
objdirect_test(s3_policy_test
  SOURCES ${OBJDIRECT_S3UTIL_DIR}/policy_test.cc ${OBJDIRECT_S3UTIL_DIR}/policy_fuzz.cc
  LIBS objdirect_s3util)
objdirect_test(s3_tagging_test
  SOURCES ${OBJDIRECT_S3UTIL_DIR}/tagging_test.cc ${OBJDIRECT_S3UTIL_DIR}/tagging_fuzz.cc
  LIBS objdirect_s3util)

# libFuzzer targets range_fuzz, conditional_fuzz, xml_fuzz, tagging_fuzz, cors_fuzz, policy_fuzz: built with clang++-14 whatever the
# project compiler is (as src/token does), only with -DOBJDIRECT_FUZZ=ON, so the normal GCC build
# is unaffected. Run e.g.: build/bin/xml_fuzz -max_total_time=60 -max_len=4096
option(OBJDIRECT_FUZZ "Build libFuzzer targets with clang++-14" OFF)
if(OBJDIRECT_FUZZ)
  find_program(OBJDIRECT_CLANGXX NAMES clang++-14 clang++ REQUIRED)
  get_filename_component(_s3util_root ${OBJDIRECT_S3UTIL_DIR}/../../.. ABSOLUTE)
  set(_s3util_common_sources ${_s3util_root}/src/common/status.cc
                             ${_s3util_root}/src/common/time.cc)
  foreach(_fuzz range conditional xml tagging cors policy)
    set(_out ${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/${_fuzz}_fuzz)
    add_custom_command(
      OUTPUT ${_out}
      COMMAND ${OBJDIRECT_CLANGXX} -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined
              -fno-sanitize-recover=undefined -DOBJDIRECT_FUZZ_MAIN
              -I${_s3util_root}/src -I${_s3util_root}/include
              ${OBJDIRECT_S3UTIL_DIR}/${_fuzz}_fuzz.cc ${OBJDIRECT_S3UTIL_SOURCES}
              ${_s3util_common_sources} -lpugixml -lboost_json -o ${_out}
      DEPENDS ${OBJDIRECT_S3UTIL_DIR}/${_fuzz}_fuzz.cc ${OBJDIRECT_S3UTIL_SOURCES}
              ${_s3util_common_sources}
      COMMENT "Building libFuzzer target ${_fuzz}_fuzz with ${OBJDIRECT_CLANGXX}"
      VERBATIM)
    add_custom_target(${_fuzz}_fuzz ALL DEPENDS ${_out})
  endforeach()
endif()
