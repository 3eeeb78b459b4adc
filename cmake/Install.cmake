# cmake --install: the headers, the libraries, the hfuse tool, and the
# package files that let another CMake project find_package(hfuse) and link
# hfuse::session (examples/cpp_session is one; tests/session builds it).
include(CMakePackageConfigHelpers)

set(hfuse_installed hfuse_support hfuse_ir hfuse_io hfuse_runtime hfuse_exec hfuse_passes hfuse_session)
if(TARGET hfuse_onnx)
  list(APPEND hfuse_installed hfuse_onnx)
endif()
if(TARGET hfuse_cuda)
  list(APPEND hfuse_installed hfuse_cuda)
endif()
foreach(t IN LISTS hfuse_installed)
  string(REPLACE "hfuse_" "" short ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${short})
  add_library(hfuse::${short} ALIAS ${t})
endforeach()

install(TARGETS ${hfuse_installed} EXPORT hfuseTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS hfuse RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/hfuse DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(hfuse_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/hfuse)
install(EXPORT hfuseTargets NAMESPACE hfuse:: DESTINATION ${hfuse_cmake_dir})
configure_package_config_file(cmake/hfuseConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/hfuseConfig.cmake
                              INSTALL_DESTINATION ${hfuse_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/hfuseConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hfuseConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/hfuseConfigVersion.cmake
        DESTINATION ${hfuse_cmake_dir})
