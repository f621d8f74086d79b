# objdirect_s3util: S3 request-parsing and XML building blocks (names, range, conditional, xml).
# Included from src/server/CMakeLists.txt; paths are relative to this file so the includer's
# directory does not matter.
set(OBJDIRECT_S3UTIL_DIR ${CMAKE_CURRENT_LIST_DIR})
set(OBJDIRECT_S3UTIL_SOURCES
    ${OBJDIRECT_S3UTIL_DIR}/names.cc
    ${OBJDIRECT_S3UTIL_DIR}/range.cc
    ${OBJDIRECT_S3UTIL_DIR}/conditional.cc
    ${OBJDIRECT_S3UTIL_DIR}/xml.cc)

add_library(objdirect_s3util STATIC ${OBJDIRECT_S3UTIL_SOURCES})
target_link_libraries(objdirect_s3util PUBLIC objdirect_common pugixml::pugixml)

objdirect_test(s3_names_test SOURCES ${OBJDIRECT_S3UTIL_DIR}/names_test.cc LIBS objdirect_s3util)
objdirect_test(s3_range_test SOURCES ${OBJDIRECT_S3UTIL_DIR}/range_test.cc LIBS objdirect_s3util)
objdirect_test(s3_conditional_test SOURCES ${OBJDIRECT_S3UTIL_DIR}/conditional_test.cc
               LIBS objdirect_s3util)
objdirect_test(s3_xml_test SOURCES ${OBJDIRECT_S3UTIL_DIR}/xml_test.cc LIBS objdirect_s3util)
