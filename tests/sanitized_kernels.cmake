# A program built with the executor's kernels under clang's sanitizers, for
# tests/fuzz and tests/tsan (each its own project, so each finds the executor's
# packages again: imported targets are seen only where they are found). The
# kernels are the three parts tools/ compiles, so they build in parallel.
# OpenMP is left out: a sanitizer cannot see inside a runtime it did not
# instrument (ThreadSanitizer would report kiln's parallel loops falsely), and
# these programs check kiln's own code and threads.
#   kiln_sanitized_kernels_program(NAME SOURCES src... SANITIZE list
#                                  [COMPILE_OPTIONS opt...] [LIBRARIES lib...])
function(kiln_sanitized_kernels_program name)
  cmake_parse_arguments(arg "" "SANITIZE" "SOURCES;COMPILE_OPTIONS;LIBRARIES" ${ARGN})
  find_package(xtensor REQUIRED)
  find_package(xsimd REQUIRED)
  find_package(dnnl REQUIRED)
  find_package(Boost 1.74 REQUIRED)
  add_executable(${name} ${arg_SOURCES}
    ${KILN_SOURCE_DIR}/tools/kernels_onednn.cpp ${KILN_SOURCE_DIR}/tools/kernels_pointwise.cpp
    ${KILN_SOURCE_DIR}/tools/kernels_rest.cpp)
  target_link_libraries(${name} PRIVATE kiln::kiln xtensor xsimd DNNL::dnnl Boost::headers ${arg_LIBRARIES})
  target_compile_definitions(${name} PRIVATE XTENSOR_USE_XSIMD)
  target_compile_options(${name} PRIVATE -fsanitize=${arg_SANITIZE} ${arg_COMPILE_OPTIONS} -g -O1)
  target_link_options(${name} PRIVATE -fsanitize=${arg_SANITIZE})
endfunction()
