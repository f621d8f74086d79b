# cmake --install: the client library for applications. Ships
#   include/objdirect/{client,config,status,export}.hpp, objdirect.h  (the public API, which
#                                          includes nothing from src/)
#   lib/libobjdirect.so.<version> (+ SONAME link and the unversioned link)
#   lib/cmake/objdirect/  find_package(objdirect) -> imported target objdirect::objdirect
#   lib/pkgconfig/objdirect.pc
# The ctest entry install_package (tests/install) installs into a temporary prefix and builds a
# program against each of the last two.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(objdirect_shared PROPERTIES EXPORT_NAME objdirect)
target_include_directories(objdirect_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(objdirect_shared INTERFACE cxx_std_20)

install(TARGETS objdirect_shared EXPORT objdirectTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client
        NAMELINK_COMPONENT client)
set(OBJDIRECT_PUBLIC_HEADERS client.hpp config.hpp export.hpp plan.hpp status.hpp objdirect.h)
list(TRANSFORM OBJDIRECT_PUBLIC_HEADERS PREPEND include/objdirect/ OUTPUT_VARIABLE _objdirect_headers)
install(FILES ${_objdirect_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/objdirect
        COMPONENT client)

set(_objdirect_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/objdirect)
install(EXPORT objdirectTargets NAMESPACE objdirect:: DESTINATION ${_objdirect_cmake_dir}
        COMPONENT client)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/objdirectConfig.cmake.in
  ${CMAKE_BINARY_DIR}/objdirectConfig.cmake INSTALL_DESTINATION ${_objdirect_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/objdirectConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/objdirectConfig.cmake
              ${CMAKE_BINARY_DIR}/objdirectConfigVersion.cmake
        DESTINATION ${_objdirect_cmake_dir} COMPONENT client)

# pkg-config: paths relative to the .pc file's folder, so that the installed tree can move.
file(RELATIVE_PATH OBJDIRECT_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${CMAKE_CURRENT_LIST_DIR}/objdirect.pc.in ${CMAKE_BINARY_DIR}/objdirect.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/objdirect.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT client)
